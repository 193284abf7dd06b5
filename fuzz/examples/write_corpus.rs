//! Writes the valid seed inputs of every target to `fuzz/corpus/<target>/`, where
//! `cargo fuzz run <target>` starts from them. An optional argument names another folder.

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    lagless_fuzz::seeds::write_corpus(&dir)?;
    println!("wrote seeds to {}", dir.display());
    Ok(())
}
