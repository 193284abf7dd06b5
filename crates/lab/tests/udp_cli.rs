//! `lagless keygen`, `token`, `serve`, `connect` and `proxy` on loopback, with ports the
//! OS picks: play, leave, time out, reconnect, refused tokens, garbage, and a proxy's loss.
//! Every process is bounded by `--seconds` (and killed when a test fails). The tests run
//! one at a time, on a small grid (64 cubes), so that unoptimised builds on a busy machine
//! keep up with real time.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// Held by each test: real-time processes of two tests at once would starve each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lagless() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lagless"))
}

/// A scratch directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lagless-udp-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs a short command to completion; panics with its stderr unless it succeeded.
fn ok(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn keygen(d: &Path) -> PathBuf {
    let key = d.join("server.key");
    ok(lagless().args(["keygen", "--out"]).arg(&key));
    assert_eq!(std::fs::read(&key).unwrap().len(), 32);
    key
}

fn token(key: &Path, id: u64, server: SocketAddr, out: &Path, extra: &[&str]) {
    ok(lagless()
        .args(["token", "--key-file"])
        .arg(key)
        .args([
            "--client-id",
            &id.to_string(),
            "--server",
            &server.to_string(),
        ])
        .arg("--out")
        .arg(out)
        .args(extra));
    assert_eq!(std::fs::read(out).unwrap().len(), 2048);
}

/// A long-running child whose stderr lines come through a channel; killed on drop.
struct Running {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits up to `secs` for a stderr line containing every one of `words`.
    fn wait_for(&mut self, words: &[&str], secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if words.iter().all(|w| line.contains(w)) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "no line with {words:?} in {secs} s; got:\n{}",
            self.seen.join("\n")
        );
    }

    /// [`Running::wait_for`], but a line seen before counts too (lines of clients that
    /// connect at once come in either order).
    fn has_or_waits_for(&mut self, words: &[&str], secs: u64) -> String {
        let seen = self
            .seen
            .iter()
            .find(|l| words.iter().all(|w| l.contains(w)));
        match seen {
            Some(line) => line.clone(),
            None => self.wait_for(words, secs),
        }
    }

    /// Waits for the process to end by itself within `secs`; returns whether it
    /// succeeded.
    fn wait(&mut self, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.seen.extend(self.lines.try_iter());
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("still running after {secs} s");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lagless serve` on an OS-chosen loopback port for at most `secs`, with its address.
fn serve(key: &Path, json: &Path, secs: u32, extra: &[&str]) -> (Running, SocketAddr) {
    let mut s = Running::spawn(
        lagless()
            .args([
                "serve",
                "--scene",
                "cubes",
                "--bind",
                "127.0.0.1:0",
                "--key-file",
            ])
            .arg(key)
            .args([
                "--max-clients",
                "8",
                "--grid",
                "8",
                "--seconds",
                &secs.to_string(),
            ])
            .arg("--json")
            .arg(json)
            .args(extra),
    );
    let line = s.wait_for(&["serving", "addr="], 30);
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .unwrap()
        .parse()
        .unwrap();
    (s, addr)
}

fn connect(token: &Path, secs: f64, json: &Path, extra: &[&str]) -> Command {
    let mut c = lagless();
    c.args(["connect", "--token"])
        .arg(token)
        .args(["--seconds", &secs.to_string(), "--json"])
        .arg(json)
        .args(extra);
    c
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn f(v: &serde_json::Value, a: &str, b: &str) -> f64 {
    v[a][b]
        .as_f64()
        .unwrap_or_else(|| panic!("{a}.{b} missing in {v}"))
}

/// A full client (prediction, interpolation) plays on loopback, leaves, and the server
/// stops cleanly on Ctrl-C with its figures written.
#[test]
fn play_on_loopback_then_ctrl_c() {
    let _one = one_at_a_time();
    let d = dir("play");
    let key = keygen(&d);
    let (mut server, addr) = serve(&key, &d.join("server.json"), 60, &[]);
    let t = d.join("c1.token");
    token(&key, 1, addr, &t, &[]);
    let c = d.join("c1.json");
    ok(&mut connect(&t, 3.0, &c, &["--seed", "4"]));
    server.wait_for(&["client connected", "player=1"], 5);
    server.wait_for(&["client left", "reason=\"Left\""], 5);
    let v = json(&c);
    assert_eq!(v["transport"], "udp");
    assert_eq!(v["client"]["ended"], "done");
    assert_eq!(f(&v, "net", "loss_pct"), 0.0, "loopback loses nothing");
    let rtt = f(&v, "sync", "rtt_ms");
    assert!(rtt > 0.0 && rtt < 50.0, "loopback rtt {rtt} ms");
    assert!(f(&v, "net", "down_kbps_mean") > 10.0);
    assert!(f(&v, "net", "up_kbps_mean") > 1.0);
    assert!(v["client"]["snapshots_received"].as_u64().unwrap() > 60);
    assert!(v["interpolation"]["delay_ms_mean"].as_f64().is_some());
    assert!(v["prediction"]["reconciles"].as_u64().unwrap() > 0);
    // Ctrl-C: a clean stop, the figures written.
    let pid = server.child.id().to_string();
    ok(Command::new("kill").args(["-INT", &pid]));
    assert!(server.wait(10), "{}", server.seen.join("\n"));
    let s = json(&d.join("server.json"));
    assert_eq!(s["server"]["connects"], 1);
    assert!(f(&s, "server", "tick_ms_p99") > 0.0);
    assert!(f(&s, "server", "seconds") < 60.0);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A client that vanishes (killed) times out, and its player goes, while another plays
/// on undisturbed; the same id comes back with a new token.
#[test]
fn vanished_client_times_out_others_play_on_reconnect_works() {
    let _one = one_at_a_time();
    let d = dir("timeout");
    let key = keygen(&d);
    let (mut server, addr) = serve(&key, &d.join("server.json"), 30, &[]);
    let (ta, tb) = (d.join("a.token"), d.join("b.token"));
    token(&key, 10, addr, &ta, &["--timeout-s", "1"]);
    token(&key, 20, addr, &tb, &["--timeout-s", "5"]);
    let b_json = d.join("b.json");
    let mut b = Running::spawn(&mut connect(&tb, 6.0, &b_json, &["--bot"]));
    server.wait_for(&["client connected", "client_id=20"], 10);
    let mut a = Running::spawn(&mut connect(&ta, 30.0, &d.join("a.json"), &["--bot"]));
    server.wait_for(&["client connected", "client_id=10"], 10);
    std::thread::sleep(Duration::from_millis(500));
    a.child.kill().unwrap();
    let left = server.wait_for(&["client left", "client_id=10"], 5);
    assert!(left.contains("TimedOut"), "{left}");
    // The same id again, with a new token.
    let ta2 = d.join("a2.token");
    token(&key, 10, addr, &ta2, &[]);
    let a2 = d.join("a2.json");
    ok(&mut connect(&ta2, 1.5, &a2, &["--bot"]));
    let v = json(&a2);
    assert_eq!(v["client"]["ended"], "done");
    assert!(v["client"]["snapshots_received"].as_u64().unwrap() > 30);
    assert!(b.wait(15));
    let v = json(&b_json);
    assert_eq!(v["client"]["ended"], "done", "b was not disturbed");
    assert_eq!(f(&v, "net", "loss_pct"), 0.0);
    // Six seconds at 64 snapshots a second, give or take the start.
    assert!(v["client"]["snapshots_received"].as_u64().unwrap() > 300);
    drop(server);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Tokens for another server, expired, or from another key get no game traffic, and
/// garbage datagrams are dropped and counted, none reaching the game.
#[test]
fn bad_tokens_and_garbage_get_nothing() {
    let _one = one_at_a_time();
    let d = dir("refuse");
    let key = keygen(&d);
    let other_key = d.join("other.key");
    ok(lagless().args(["keygen", "--out"]).arg(&other_key));
    let server_json = d.join("server.json");
    let (mut server, addr) = serve(&key, &server_json, 8, &[]);
    let elsewhere: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let cases = [
        ("foreign", key.as_path(), Some(elsewhere), vec![]),
        ("expired", key.as_path(), None, vec!["--expire-s", "0"]),
        ("other-key", other_key.as_path(), None, vec![]),
    ];
    for (name, k, target, extra) in cases {
        let t = d.join(format!("{name}.token"));
        token(k, 5, target.unwrap_or(addr), &t, &extra);
        let mut c = connect(&t, 1.0, &d.join(format!("{name}.json")), &[]);
        let out = c.args(["--connect-timeout-s", "1.5"]).output().unwrap();
        assert!(!out.status.success(), "{name} connected");
        assert!(!d.join(format!("{name}.json")).exists(), "{name} reported");
    }
    // Garbage of every prefix byte and a few lengths, from an unknown address.
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut sent = 0;
    for prefix in 0..=255u8 {
        for len in [1usize, 18, 300, 1078, 1400] {
            let mut p = vec![prefix; len];
            p[0] = prefix;
            socket.send_to(&p, addr).unwrap();
            sent += 1;
        }
        // Paced, so the kernel's receive buffer does not drop them before anyone counts.
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(server.wait(15));
    let s = json(&server_json);
    assert_eq!(s["server"]["connects"], 0);
    assert_eq!(
        s["server"]["packets_rejected"], 0,
        "nothing reached the game"
    );
    let dropped = s["server"]["netcode_dropped"].as_u64().unwrap();
    assert!(
        dropped >= sent,
        "{dropped} of {sent} garbage datagrams counted"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// Through `lagless proxy --profile lossy` (25% uniform loss, 75 ms each way), the client
/// sees the profile's loss and delay.
#[test]
fn client_through_the_proxy_sees_the_profile() {
    let _one = one_at_a_time();
    let d = dir("proxy");
    let key = keygen(&d);
    // The proxy's port must be known before the server starts, for the token; ask the OS
    // for a free one.
    let proxy_addr = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_server, addr) = serve(
        &key,
        &d.join("server.json"),
        30,
        &["--public-addr", &proxy_addr.to_string()],
    );
    let mut proxy = Running::spawn(lagless().args([
        "proxy",
        "--listen",
        &proxy_addr.to_string(),
        "--forward",
        &addr.to_string(),
        "--profile",
        "lossy",
        "--seed",
        "3",
        "--seconds",
        "30",
    ]));
    proxy.wait_for(&["proxy started"], 10);
    let t = d.join("c.token");
    token(&key, 1, proxy_addr, &t, &[]);
    let c = d.join("c.json");
    ok(&mut connect(&t, 5.0, &c, &["--bot", "--label", "lossy"]));
    let v = json(&c);
    assert_eq!(v["profile"], "lossy");
    let loss = f(&v, "net", "loss_pct");
    assert!(
        (19.0..=31.0).contains(&loss),
        "loss {loss}% through lossy (25%)"
    );
    let rtt = f(&v, "sync", "rtt_ms");
    assert!(
        (140.0..=200.0).contains(&rtt),
        "rtt {rtt} ms through lossy (150)"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `run --transport udp`: server and clients in one process over loopback, through the
/// in-process proxy, with the emulator run's figures (errors against the server's truth
/// included) and the profile's loss.
#[test]
fn run_over_udp_reports_like_the_emulator() {
    let _one = one_at_a_time();
    let d = dir("run");
    let out = d.join("m.json");
    ok(lagless()
        .args([
            "run",
            "--transport",
            "udp",
            "--profile",
            "lossy",
            "--clients",
            "2",
        ])
        .args(["--seconds", "4", "--seed", "2", "--json"])
        .arg(&out));
    let v = json(&out);
    assert_eq!(v["transport"], "udp");
    assert_eq!(v["profile"], "lossy");
    assert_eq!(v["clients"], 2);
    assert_eq!(v["client"]["ended"], "done,done");
    let loss = f(&v, "net", "loss_pct");
    assert!(
        (17.0..=33.0).contains(&loss),
        "loss {loss}% through lossy (25%)"
    );
    for (a, b) in [
        ("render", "error_cm_p99"),
        ("interpolation", "error_cm_p99"),
        ("server", "tick_ms_p99"),
        ("server", "input_starved_pct"),
        ("sync", "rtt_ms"),
    ] {
        assert!(f(&v, a, b).is_finite(), "{a}.{b}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// `run --transport udp --switch-at`: every client changes its socket mid-run and is
/// back with its player, no echoed reliable message lost or doubled; without a UDP
/// transport the flag is refused. The rocket scene: a debug build of the cube scene's
/// clients does not keep real time on a loaded machine (frames of over a second, and
/// echoes overdue before any switch).
#[test]
fn a_switch_mid_run_keeps_the_players_and_every_message() {
    let _one = one_at_a_time();
    let d = dir("switch");
    let out = d.join("s.json");
    ok(lagless()
        .args([
            "run",
            "--transport",
            "udp",
            "--scene",
            "rocket",
            "--profile",
            "mobile",
        ])
        .args(["--clients", "2", "--seconds", "5", "--switch-at", "2.5"])
        .args(["--seed", "1", "--json"])
        .arg(&out));
    let v = json(&out);
    assert_eq!(v["client"]["ended"], "done,done");
    assert_eq!(v["switch"]["clients"], 2);
    assert_eq!(f(&v, "switch", "player_kept_pct"), 100.0);
    assert_eq!(v["switch"]["messages_lost"], 0);
    assert_eq!(v["switch"]["messages_duplicated"], 0);
    assert!(
        v["switch"]["messages_sent"]
            .as_u64()
            .is_some_and(|n| n >= 10)
    );
    // Taken back as resumes, not as new players.
    assert_eq!(v["server"]["connects"], 2);
    // Loose for a loaded machine: two round trips of 200 ms, the hello and a snapshot.
    let back = f(&v, "switch", "back_ms_max");
    assert!(
        back > 0.0 && back < 3000.0,
        "back in play {back} ms after the switch"
    );
    let refused = lagless()
        .args(["run", "--seconds", "2", "--switch-at", "1"])
        .output()
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--transport udp"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Every scene runs over UDP, and its report has the emulator's families: the walkers'
/// dead reckoning judged against the server's record, the shooter's hits, the rocket's
/// ball, and the input delay and lead on the server's clock.
#[test]
fn every_scene_runs_over_udp_with_its_own_figures() {
    let _one = one_at_a_time();
    let d = dir("scenes");
    for (scene, family, name) in [
        ("walkers", "deadreckoning", "error_cm_mean"),
        ("shooter", "hits", "shown"),
        ("rocket", "ball", "error_cm_p99"),
    ] {
        let out = d.join(format!("{scene}.json"));
        ok(lagless()
            .args(["run", "--transport", "udp", "--scene", scene])
            .args(["--profile", "loopback", "--clients", "2", "--seconds", "3"])
            .arg("--json")
            .arg(&out));
        let v = json(&out);
        assert_eq!(v["scene"], scene);
        assert_eq!(v["client"]["ended"], "done,done", "{scene}");
        assert!(f(&v, family, name).is_finite(), "{scene}: {family}.{name}");
        assert!(f(&v, "input", "delay_ms_mean") > 0.0, "{scene}");
        assert_eq!(v["replication"]["view_mismatches"], 0, "{scene}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A client of another scene than the server's is refused, with both named.
#[test]
fn a_client_of_another_scene_is_refused_by_name() {
    let _one = one_at_a_time();
    let d = dir("other-scene");
    let key = keygen(&d);
    let (server, addr) = serve(&key, &d.join("s.json"), 20, &[]);
    let t = d.join("c.token");
    token(&key, 1, addr, &t, &[]);
    let out = connect(&t, 2.0, &d.join("c.json"), &["--scene", "rocket"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the server runs scene cubes, this client rocket"),
        "{err}"
    );
    drop(server);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `GET path` on the admin endpoint: the status line and the body.
fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    try_http_get(addr, path).unwrap()
}

/// [`http_get`], `None` if the request fails (a server still starting).
fn try_http_get(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    // HTTP/1.0: the server closes after one response and sends it unchunked.
    write!(s, "GET {path} HTTP/1.0\r\nHost: lagless\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.lines().next().unwrap_or("").to_owned();
    Some((status, body.to_owned()))
}

/// The address `serve --admin` logged.
fn admin_addr(server: &mut Running) -> SocketAddr {
    // Logged before the "serving" line `serve` waited for.
    let line = server.has_or_waits_for(&["admin endpoint", "bound="], 10);
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("bound="))
        .unwrap()
        .parse()
        .unwrap()
}

/// Two matches in one process: each client joins the match its token names, a token
/// for a match not hosted gets nothing, the admin endpoint counts clients per match;
/// SIGTERM drains (not ready, new clients denied) until the matches have played out,
/// then the server exits cleanly.
#[test]
fn matches_admin_endpoint_and_drain_on_sigterm() {
    let _one = one_at_a_time();
    let d = dir("matches");
    let key = keygen(&d);
    let extra = [
        "--matches",
        "2",
        "--admin",
        "127.0.0.1:0",
        "--drain-s",
        "20",
    ];
    let (mut server, addr) = serve(&key, &d.join("server.json"), 60, &extra);
    let admin = admin_addr(&mut server);
    assert!(http_get(admin, "/healthz").0.contains("200"));
    let tokens: Vec<PathBuf> = [(1, 0), (2, 1), (3, 5), (4, 0)]
        .iter()
        .map(|&(id, m)| {
            let t = d.join(format!("{id}.token"));
            token(&key, id, addr, &t, &["--match", &m.to_string()]);
            t
        })
        .collect();
    let bot = |t: &Path, secs: f64, name: &str| {
        let mut c = connect(
            t,
            secs,
            &d.join(name),
            &["--bot", "--connect-timeout-s", "3"],
        );
        c.stderr(Stdio::null()).stdout(Stdio::null());
        c
    };
    let mut a = bot(&tokens[0], 8.0, "a.json").spawn().unwrap();
    let mut b = bot(&tokens[1], 8.0, "b.json").spawn().unwrap();
    server.has_or_waits_for(
        &["client connected", "client_id=1", "match_id=0", "player=1"],
        10,
    );
    server.has_or_waits_for(
        &["client connected", "client_id=2", "match_id=1", "player=1"],
        10,
    );
    // No such match: turned away.
    let stray = bot(&tokens[2], 2.0, "stray.json").status().unwrap();
    assert!(!stray.success());
    std::thread::sleep(Duration::from_millis(1200));
    let (status, metrics) = http_get(admin, "/metrics");
    assert!(status.contains("200"), "{status}");
    for line in [
        "lagless_clients{match=\"0\"} 1",
        "lagless_clients{match=\"1\"} 1",
        "lagless_ready 1",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    assert!(http_get(admin, "/readyz").0.contains("200"));

    // SIGTERM: drain.
    let pid = server.child.id().to_string();
    ok(Command::new("kill").args(["-TERM", &pid]));
    server.wait_for(&["draining"], 5);
    let (status, body) = http_get(admin, "/readyz");
    assert!(
        status.contains("503") && body.contains("draining"),
        "{status} {body}"
    );
    let late = bot(&tokens[3], 2.0, "late.json").status().unwrap();
    assert!(!late.success(), "a client got in while draining");
    // The playing clients finish their 8 s; then the server is done.
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    server.wait_for(&["drained"], 10);
    assert!(server.wait(10), "{}", server.seen.join("\n"));
    let s = json(&d.join("server.json"));
    assert_eq!(s["server"]["connects"], 2);
    // Ticks per second per match, not every match's ticks summed (128).
    let tps = s["server"]["ticks_per_s"].as_f64().unwrap();
    assert!((50.0..=70.0).contains(&tps), "{tps}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A real Prometheus server (from the system's packages) scrapes `serve --admin`'s
/// `/metrics`: it parses every sample and sees the server up, ticking at its rate.
/// Needs `prometheus` on the PATH: `.ci/run` installs it and runs this.
#[test]
#[ignore = "needs the prometheus binary; .ci/run installs it and runs this with --ignored"]
fn prometheus_scrapes_the_admin_endpoint() {
    let _one = one_at_a_time();
    let d = dir("prometheus");
    let key = keygen(&d);
    let (mut server, _) = serve(
        &key,
        &d.join("server.json"),
        60,
        &["--admin", "127.0.0.1:0"],
    );
    let admin = admin_addr(&mut server);
    let web = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = d.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lagless\n    \
             static_configs:\n      - targets: ['{admin}']\n"
        ),
    )
    .unwrap();
    let mut prometheus = Running::spawn(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", d.join("tsdb").display()))
            .arg(format!("--web.listen-address={web}")),
    );
    let query = |q: &str| -> Option<f64> {
        let (_, body) = try_http_get(web, &format!("/api/v1/query?query={q}"))?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = None;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        let tps = query("lagless_ticks_per_second");
        if query("lagless_up") == Some(1.0) && tps.is_some_and(|t| t > 30.0) {
            seen = tps;
            break;
        }
    }
    let (_, targets) = try_http_get(web, "/api/v1/targets").unwrap_or_default();
    assert!(
        seen.is_some(),
        "Prometheus never saw the server ticking: {targets}"
    );
    assert!(targets.contains("\"health\":\"up\""), "{targets}");
    assert!(targets.contains("\"lastError\":\"\""), "{targets}");
    // The per-match gauge and the wall-time quantiles came through as well.
    assert_eq!(query("lagless_clients"), Some(0.0));
    assert!(query("lagless_tick_wall_ms").is_some_and(|ms| ms >= 0.0));
    let _ = prometheus.child.kill();
    std::fs::remove_dir_all(&d).unwrap();
}
