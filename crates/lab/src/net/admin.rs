//! `lagless serve --admin ADDR`: what an orchestrator asks a game server process.
//!
//! - `GET /healthz`: 200 while the server loop runs (it updated the state within
//!   [`STALE_AFTER`]), else 503: restart me.
//! - `GET /readyz`: 200 while the server admits players (not full, not draining), else 503
//!   with the reason: send no one here.
//! - `GET /metrics`: the Prometheus text format (version 0.0.4) of [`AdminState`].
//!
//! The server loop writes an [`AdminState`] once a second and at every connect and leave;
//! a thread of its own answers the requests from the latest one, so a slow scraper never
//! holds up a tick. `docs/scale.md` maps these onto Agones' SDK calls.

use crate::view::{peek_head, respond};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A loop that has not updated the state for this long is not healthy.
pub const STALE_AFTER: Duration = Duration::from_secs(3);

/// What the server loop last said of itself.
#[derive(Debug, Clone, Default)]
pub struct AdminState {
    /// Admitting new clients (false once draining).
    pub accepting: bool,
    /// Draining: no new clients, the matches play out, then the process exits.
    pub draining: bool,
    /// Client slots.
    pub max_clients: usize,
    /// Clients per match, by match id.
    pub clients: BTreeMap<u32, usize>,
    /// Ticks run over the last second (every match's ticks run together).
    pub ticks_per_s: f64,
    /// Wall time of a tick (every match's, run together) over the last second: p50 and
    /// p99, ms.
    pub tick_wall_ms: (f64, f64),
    /// Datagrams and bytes in and out since the start.
    pub datagrams: (u64, u64),
    /// Bytes in and out since the start.
    pub bytes: (u64, u64),
    /// Datagrams netcode.io dropped since the start, by reason.
    pub drops: Vec<(String, u64)>,
    /// Client packets the game's servers refused since the start.
    pub refused: u64,
    /// Clients that connected, left and timed out since the start.
    pub connects: u64,
    /// Clients that left.
    pub disconnects: u64,
    /// Of those, timed out.
    pub timeouts: u64,
    /// Matches that ended and started again empty.
    pub match_restarts: u64,
    /// Resident memory, MB.
    pub rss_mb: Option<f64>,
}

impl AdminState {
    /// Clients connected, every match.
    pub fn clients_total(&self) -> usize {
        self.clients.values().sum()
    }

    /// Why the server is not ready, if it is not.
    pub fn not_ready(&self) -> Option<&'static str> {
        if self.draining {
            Some("draining")
        } else if !self.accepting {
            Some("not accepting")
        } else if self.clients_total() >= self.max_clients {
            Some("full")
        } else {
            None
        }
    }

    /// The state in the Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP lagless_{name} {help}");
            let _ = writeln!(out, "# TYPE lagless_{name} {kind}");
            for (labels, v) in samples {
                let _ = writeln!(out, "lagless_{name}{labels} {}", number(*v));
            }
        };
        let one = |v: f64| vec![(String::new(), v)];
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        metric("up", "gauge", "The server loop is running.", &one(1.0));
        let ready = flag(self.not_ready().is_none());
        metric("ready", "gauge", "Admitting players.", &one(ready));
        let draining = flag(self.draining);
        metric("draining", "gauge", "Draining before exit.", &one(draining));
        let slots = self.max_clients as f64;
        metric("client_slots", "gauge", "Client slots.", &one(slots));
        let per_match: Vec<(String, f64)> = self
            .clients
            .iter()
            .map(|(m, n)| (format!("{{match=\"{m}\"}}"), *n as f64))
            .collect();
        metric(
            "clients",
            "gauge",
            "Clients connected, per match.",
            &per_match,
        );
        let tps = one(self.ticks_per_s);
        metric(
            "ticks_per_second",
            "gauge",
            "Ticks over the last second.",
            &tps,
        );
        let (p50, p99) = self.tick_wall_ms;
        let quantiles = vec![
            ("{quantile=\"0.5\"}".to_owned(), p50),
            ("{quantile=\"0.99\"}".to_owned(), p99),
        ];
        let help = "Wall time of a tick over the last second, ms.";
        metric("tick_wall_ms", "gauge", help, &quantiles);
        let io = |a: u64, b: u64| {
            vec![
                ("{direction=\"in\"}".to_owned(), a as f64),
                ("{direction=\"out\"}".to_owned(), b as f64),
            ]
        };
        let (din, dout) = self.datagrams;
        metric(
            "datagrams_total",
            "counter",
            "UDP datagrams.",
            &io(din, dout),
        );
        let (bin, bout) = self.bytes;
        metric(
            "bytes_total",
            "counter",
            "UDP payload bytes.",
            &io(bin, bout),
        );
        let drops: Vec<(String, f64)> = self
            .drops
            .iter()
            .map(|(r, n)| (format!("{{reason=\"{r}\"}}"), *n as f64))
            .collect();
        let help = "Datagrams netcode.io dropped, by reason.";
        metric("dropped_total", "counter", help, &drops);
        let help = "Client packets the game's servers refused.";
        metric("refused_total", "counter", help, &one(self.refused as f64));
        let events = vec![
            ("{event=\"connect\"}".to_owned(), self.connects as f64),
            ("{event=\"disconnect\"}".to_owned(), self.disconnects as f64),
            ("{event=\"timeout\"}".to_owned(), self.timeouts as f64),
        ];
        metric(
            "client_events_total",
            "counter",
            "Clients that came and went.",
            &events,
        );
        let restarts = one(self.match_restarts as f64);
        metric(
            "match_restarts_total",
            "counter",
            "Matches that ended.",
            &restarts,
        );
        if let Some(mb) = self.rss_mb {
            metric(
                "resident_memory_mb",
                "gauge",
                "Resident memory, MB.",
                &one(mb),
            );
        }
        out
    }
}

/// A sample value as Prometheus reads it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The state the server loop writes and the admin thread reads, with when it was written.
pub type SharedState = Arc<Mutex<(AdminState, Instant)>>;

/// Binds `addr` and answers the admin requests from `state` on a thread of its own, for
/// as long as the process lives. Returns the bound address.
pub fn serve_admin(addr: SocketAddr, state: SharedState) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("lagless-admin".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // One request at a time: an orchestrator's probes are small and rare.
                let _ = answer(stream, &state);
            }
        })?;
    Ok(local)
}

/// One request.
fn answer(mut stream: TcpStream, state: &SharedState) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let Some(head) = peek_head(&stream)? else {
        return Ok(());
    };
    // Take the head off the socket (the body of a GET is empty).
    let mut buf = vec![0; head.len];
    stream.read_exact(&mut buf)?;
    let (s, written) = {
        // A poisoned lock still holds the last state written.
        let guard = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (guard.0.clone(), guard.1)
    };
    let text = "text/plain; charset=utf-8";
    if head.method != "GET" {
        return respond(&mut stream, "405 Method Not Allowed", text, b"GET only\n");
    }
    match head.path.as_str() {
        "/healthz" if written.elapsed() <= STALE_AFTER => {
            respond(&mut stream, "200 OK", text, b"ok\n")
        }
        "/healthz" => respond(
            &mut stream,
            "503 Service Unavailable",
            text,
            b"the server loop is stuck\n",
        ),
        "/readyz" => match s.not_ready() {
            None => respond(&mut stream, "200 OK", text, b"ready\n"),
            Some(why) => respond(
                &mut stream,
                "503 Service Unavailable",
                text,
                format!("{why}\n").as_bytes(),
            ),
        },
        "/metrics" => respond(
            &mut stream,
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            s.prometheus().as_bytes(),
        ),
        _ => respond(&mut stream, "404 Not Found", text, b"not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn probes_say_healthy_ready_full_and_draining() {
        let state = AdminState {
            accepting: true,
            max_clients: 2,
            clients: BTreeMap::from([(0, 1)]),
            drops: vec![("replayed".into(), 3)],
            ..AdminState::default()
        };
        let shared: SharedState = Arc::new(Mutex::new((state, Instant::now())));
        let addr = serve_admin("127.0.0.1:0".parse().expect("addr"), shared.clone()).expect("bind");
        assert!(get(addr, "/healthz").starts_with("HTTP/1.1 200"));
        assert!(get(addr, "/readyz").starts_with("HTTP/1.1 200"));
        let metrics = get(addr, "/metrics");
        assert!(
            metrics.contains("lagless_clients{match=\"0\"} 1"),
            "{metrics}"
        );
        assert!(metrics.contains("lagless_dropped_total{reason=\"replayed\"} 3"));
        assert!(get(addr, "/nothing").starts_with("HTTP/1.1 404"));

        shared.lock().expect("lock").0.clients.insert(0, 2);
        let full = get(addr, "/readyz");
        assert!(
            full.starts_with("HTTP/1.1 503") && full.ends_with("full\n"),
            "{full}"
        );
        shared.lock().expect("lock").0.draining = true;
        assert!(get(addr, "/readyz").ends_with("draining\n"));
        // A loop that stopped writing is not healthy.
        shared.lock().expect("lock").1 = Instant::now() - STALE_AFTER * 2;
        assert!(get(addr, "/healthz").starts_with("HTTP/1.1 503"));
    }
}
