//! `lagless view`'s endpoints over real loopback sockets: the page, the metrics, the
//! WebSocket's frames, keys and knobs, and bad input refused without harm.

use lagless_lab::RunConfig;
use lagless_lab::view::Viewer;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tungstenite::{Message, WebSocket, stream::MaybeTlsStream};

/// A viewer of the cube scene on a free loopback port, serving on a thread.
fn start(profile: &str) -> SocketAddr {
    let config = RunConfig {
        profile: profile.into(),
        seconds: 3600.0,
        ..RunConfig::default()
    };
    let viewer = Viewer::start(config, "127.0.0.1:0".parse().expect("addr")).expect("starts");
    let addr = viewer.local_addr().expect("bound");
    std::thread::spawn(move || viewer.serve());
    addr
}

/// One plain HTTP GET: status line and body.
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").expect("head");
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

type Ws = WebSocket<MaybeTlsStream<TcpStream>>;

fn socket(addr: SocketAddr) -> Ws {
    let (ws, _) = tungstenite::connect(format!("ws://{addr}/ws")).expect("websocket");
    ws
}

/// Frames as `f32`s and JSON texts, until `done` says enough or `limit` passes.
fn read_until(
    ws: &mut Ws,
    limit: Duration,
    mut done: impl FnMut(&[f32], Option<&serde_json::Value>) -> bool,
) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        match ws.read().expect("read") {
            Message::Binary(b) => {
                let f: Vec<f32> = b
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                if done(&f, None) {
                    return true;
                }
            }
            Message::Text(t) => {
                let v: serde_json::Value = serde_json::from_str(t.as_str()).expect("json");
                if done(&[], Some(&v)) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// The own player's position on the server in a frame (x, z).
fn server_own(f: &[f32]) -> (f32, f32) {
    let own = f[6] as usize;
    (f[8 + 2 * (own - 1)], f[8 + 2 * (own - 1) + 1])
}

#[test]
fn page_metrics_and_unknown_paths() {
    let addr = start("lan");
    let (status, body) = get(addr, "/");
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("<title>lagless view</title>"));
    let (status, body) = get(addr, "/api/metrics");
    assert!(status.contains("200"), "{status}");
    let m: serde_json::Value = serde_json::from_str(&body).expect("metrics json");
    assert_eq!(m["scene"], "cubes");
    assert!(m["render"]["error_cm_p99"].is_number() || m["render"]["error_cm_p99"].is_null());
    assert!(m["net"].is_object() && m["interpolation"].is_object());
    assert!(get(addr, "/nope").0.contains("404"));
    // Not HTTP at all: refused, and the server goes on.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"\x00\x01garbage\r\n\r\n").expect("send");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 4"), "{reply}");
    assert!(get(addr, "/").0.contains("200"));
}

#[test]
fn frames_arrive_keys_move_the_player_and_knobs_show_in_the_metrics() {
    let addr = start("lan");
    let mut ws = socket(addr);
    let mut hello = false;
    let mut frames = 0;
    assert!(read_until(&mut ws, Duration::from_secs(20), |f, text| {
        hello |= text.is_some_and(|t| t["type"] == "hello");
        frames += usize::from(!f.is_empty() && f[0] == 1.0);
        hello && frames >= 20
    }));
    // Hold a key for a second: the server's player goes its way. Bodies may block one
    // direction, so each is tried in turn until one moves the player half a metre.
    let mut seq = 0;
    let mut moved = Vec::new();
    for (key, axis, sign) in [("d", 0, 1.0), ("w", 1, -1.0), ("a", 0, -1.0), ("s", 1, 1.0)] {
        seq += 1;
        let held = seq;
        ws.send(Message::text(format!(r#"{{"keys":"{key}","seq":{held}}}"#)))
            .expect("send");
        // Timed from the first frame that took the key in, so a loaded machine only
        // makes the test slower.
        let (mut first, mut last) = (None, None);
        let mut since = None;
        read_until(&mut ws, Duration::from_secs(20), |f, _| {
            if f.len() > 8 && f[5] >= held as f32 {
                let p = server_own(f);
                first.get_or_insert(p);
                last = Some(p);
                let since = since.get_or_insert_with(Instant::now);
                return since.elapsed() > Duration::from_millis(1200);
            }
            false
        });
        seq += 1;
        ws.send(Message::text(format!(r#"{{"keys":"","seq":{seq}}}"#)))
            .expect("send");
        let (first, last) = first.zip(last).expect("frames echo the key change");
        let gone = sign
            * if axis == 0 {
                last.0 - first.0
            } else {
                last.1 - first.1
            };
        moved.push((key, gone));
        if gone > 0.5 {
            break;
        }
    }
    assert!(
        moved.iter().any(|(_, m)| *m > 0.5),
        "a held key moves the player its way: {moved:?}"
    );
    // Bad input: errors come back, the connection stays.
    for bad in [
        "not json",
        r#"{"knob":"loss_pct","value":500}"#,
        r#"{"keys":"q"}"#,
    ] {
        ws.send(Message::text(bad)).expect("send");
        assert!(
            read_until(&mut ws, Duration::from_secs(5), |_, t| t
                .is_some_and(|t| t["type"] == "error")),
            "{bad} refused"
        );
    }
    ws.send(Message::binary(vec![1, 2, 3])).expect("send");
    assert!(read_until(&mut ws, Duration::from_secs(5), |_, t| t
        .is_some_and(|t| t["type"] == "error")));
    // A knob: its new value comes back, and the metrics record it.
    ws.send(Message::text(r#"{"knob":"loss_pct","value":20}"#))
        .expect("send");
    assert!(read_until(&mut ws, Duration::from_secs(5), |_, t| t
        .is_some_and(|t| t["type"] == "knobs" && t["loss_pct"] == 20.0)));
    let (_, body) = get(addr, "/api/metrics");
    let m: serde_json::Value = serde_json::from_str(&body).expect("metrics json");
    let changes = m["view"]["knob_changes"].as_str().expect("knob changes");
    assert!(changes.contains("LossPct(20.0)"), "{changes}");
    for knob in [
        r#"{"knob":"prediction","value":false}"#,
        r#"{"knob":"prediction","value":true}"#,
        r#"{"knob":"smoothing","value":false}"#,
        r#"{"knob":"half_life_ms","value":300}"#,
        r#"{"knob":"snapshot_hz","value":20}"#,
        r#"{"knob":"interpolation","value":"fixed3"}"#,
        r#"{"knob":"profile","value":"wifi"}"#,
    ] {
        ws.send(Message::text(knob)).expect("send");
        assert!(
            read_until(&mut ws, Duration::from_secs(5), |_, t| t
                .is_some_and(|t| t["type"] == "knobs")),
            "{knob} taken"
        );
    }
    // Longer than any command: refused with a reason.
    ws.send(Message::text(format!(
        r#"{{"keys":"{}"}}"#,
        " ".repeat(4000)
    )))
    .expect("send");
    assert!(read_until(&mut ws, Duration::from_secs(5), |_, t| t
        .is_some_and(|t| t["type"] == "error")));
    // Far too long: that connection is dropped before it is buffered; the next one works.
    let mut big = socket(addr);
    let _ = big.send(Message::binary(vec![0; 1 << 20]));
    let dropped = (0..100).any(|_| big.read().is_err());
    assert!(dropped, "an oversized message ends its connection");
    // Frames go on after all of it.
    let mut more = 0;
    assert!(read_until(&mut ws, Duration::from_secs(5), |f, _| {
        more += usize::from(!f.is_empty());
        more > 10
    }));
}
