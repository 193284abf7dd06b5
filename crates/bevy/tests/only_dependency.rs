//! A game that depends on nothing but `lagless-bevy` derives Bevy's traits (issue 49,
//! item 8): a crate made on the fly in a temporary directory, with `lagless-bevy` its one
//! dependency, must `cargo check`. Bevy's derives expand to `bevy_ecs::...` paths when
//! the manifest names no Bevy crate; `lagless_bevy::bevy::prelude` names `bevy_ecs`.
//!
//! Ignored by default: it runs cargo on a crate outside the workspace, which checks Bevy
//! again (about two minutes on a cold target). Run it with `--ignored`.
use std::path::PathBuf;
use std::process::Command;

const GAME: &str = r#"
use lagless_bevy::bevy::prelude::*;
use lagless_bevy::*;

#[derive(Component, Default)]
#[require(Transform)]
pub struct Player;

#[derive(Component, Clone, Copy, PartialEq)]
pub struct Position(pub Vec2);
net_component!(Position, vec2("position", 50.0, 0.01));

#[derive(Resource, Default)]
pub struct Round(pub u32);

#[derive(Message)]
pub struct Scored(pub u32);

#[derive(SystemSet, Debug, Clone, PartialEq, Eq, Hash)]
pub struct GameSystems;

pub fn protocol() -> Protocol {
    Protocol::builder(NetConfig::new(30))
        .kind(NetKind::new::<Player>("player").with::<Position>())
        .build()
        .expect("a valid protocol")
}
"#;

#[test]
#[ignore = "runs cargo check on a crate outside the workspace (minutes on a cold target)"]
fn derives_work_with_only_lagless_bevy_as_a_dependency() {
    let bevy = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("lagless-bevy-only-dep-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).expect("a temporary directory");
    let manifest = format!(
        "[package]\nname = \"only-dep\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
         [dependencies]\nlagless-bevy = {{ path = {:?} }}\n\n[workspace]\n",
        bevy.display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("writes");
    std::fs::write(dir.join("src/lib.rs"), GAME).expect("writes");
    // The workspace's lock file, so the same versions resolve offline.
    let lock = bevy.join("../../Cargo.lock");
    std::fs::copy(lock, dir.join("Cargo.lock")).expect("copies the lock file");
    let out = Command::new(env!("CARGO"))
        .args(["check", "--offline", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .output()
        .expect("runs cargo");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
