//! `lagless view`: a scene's server and client run in real time over the emulated
//! network, shown in a browser page with the keyboard driving the client's player and
//! every knob live.
//!
//! - `live.rs`: the lab's runner stepped from a real clock on a thread of its own; it
//!   takes keys and knobs between steps and sends each client frame to the pages.
//! - `protocol.rs`: what the page and the server say to each other, checked.
//! - `page.html`: the page, plain JS and canvas 2D, built into the binary.
//!
//! The HTTP side is std's `TcpListener` with a thread per connection: `GET /` (the page),
//! `GET /api/metrics` (the run's metrics so far, as `lagless run --json` writes them) and
//! `GET /ws` (the WebSocket, through `tungstenite`). A viewer is one person on one machine,
//! so nothing here needs more than that.

pub mod live;
pub mod protocol;

use crate::config::RunConfig;
use live::{Outgoing, Request};
use protocol::parse_command;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::time::Duration;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

/// The page, built into the binary so there is nothing to install or build.
pub const PAGE: &str = include_str!("page.html");

/// The longest request head the server reads.
const MAX_HEAD_BYTES: usize = 8 * 1024;
/// The largest WebSocket message a page may send (commands are under
/// [`protocol::MAX_COMMAND_BYTES`]; this only bounds what is buffered before that check).
const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Frames queued for one page before it starts losing them (it is behind).
const PAGE_QUEUE: usize = 8;
/// How long a connection waits for the page to send something before it looks for frames
/// to send: the latency a frame can gain here.
const WS_POLL: Duration = Duration::from_millis(2);

/// A running `lagless view`: its address, and the way to its run.
pub struct Viewer {
    listener: TcpListener,
    requests: Sender<Request>,
    tick_hz: u32,
}

impl Viewer {
    /// Builds the run for `config` (its scene by name) on a thread of its own, and binds
    /// `addr` (port 0 picks a free one).
    pub fn start(config: RunConfig, addr: SocketAddr) -> Result<Self, String> {
        let listener = TcpListener::bind(addr).map_err(|e| format!("cannot bind {addr}: {e}"))?;
        let tick_hz = config.server.tick_hz;
        let (requests, rx) = std::sync::mpsc::channel();
        let (ready_tx, ready) = sync_channel(1);
        let scene = config.scene.clone();
        let spawn = |f: fn(RunConfig, Receiver<Request>, SyncSender<Result<(), String>>)| {
            std::thread::Builder::new()
                .name("lagless-view-run".into())
                .spawn(move || f(config, rx, ready_tx))
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        crate::with_scene!(scene.as_str(), S => spawn(live::run::<S>)?,
            else return Err(crate::runner::RunError::UnknownScene(scene.clone()).to_string()));
        ready
            .recv()
            .map_err(|_| "the run stopped before it started".to_string())??;
        Ok(Self {
            listener,
            requests,
            tick_hz,
        })
    }

    /// The address the page is served on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves connections until the process ends, a thread each.
    pub fn serve(self) {
        for stream in self.listener.incoming() {
            let Ok(stream) = stream else { continue };
            let requests = self.requests.clone();
            let tick_hz = self.tick_hz;
            let _ = std::thread::Builder::new()
                .name("lagless-view-conn".into())
                .spawn(move || {
                    // A connection's failure is its own: the page reconnects.
                    let _ = connection(stream, &requests, tick_hz);
                });
        }
    }
}

/// The request line and headers of one HTTP request, as far as this server cares.
#[derive(Debug, PartialEq)]
pub struct Head {
    /// `GET`, ...
    pub method: String,
    /// The path, query cut off.
    pub path: String,
    /// An `Upgrade: websocket` header was there.
    pub websocket: bool,
    /// Bytes of the head, blank line included.
    pub len: usize,
}

/// Parses a request head from the start of `bytes`, `None` until it is complete (or if
/// it is not HTTP).
pub fn parse_head(bytes: &[u8]) -> Option<Head> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?;
    let path = target.split('?').next().unwrap_or(target).to_owned();
    let websocket = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("upgrade") && v.trim().eq_ignore_ascii_case("websocket")
        })
    });
    Some(Head {
        method,
        path,
        websocket,
        len: end,
    })
}

/// Peeks at the request head without taking it off the socket (the WebSocket handshake
/// reads it again).
pub(crate) fn peek_head(stream: &TcpStream) -> std::io::Result<Option<Head>> {
    let mut buf = vec![0; MAX_HEAD_BYTES];
    for _ in 0..200 {
        let n = stream.peek(&mut buf)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(head) = parse_head(&buf[..n]) {
            return Ok(Some(head));
        }
        if n == buf.len() {
            return Ok(None);
        }
        // Part of the head is still on its way.
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(None)
}

pub(crate) fn respond(
    stream: &mut TcpStream,
    status: &str,
    kind: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// One connection: a page, the metrics, or the WebSocket.
fn connection(
    mut stream: TcpStream,
    requests: &Sender<Request>,
    tick_hz: u32,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let _ = stream.set_nodelay(true);
    let Some(head) = peek_head(&stream)? else {
        return respond(
            &mut stream,
            "400 Bad Request",
            "text/plain",
            b"bad request\n",
        );
    };
    if head.websocket && head.path == "/ws" {
        return websocket(stream, requests, tick_hz);
    }
    // Take the head off the socket: closing with unread bytes would reset the connection
    // and could cut the response short.
    let mut taken = vec![0; head.len];
    stream.read_exact(&mut taken)?;
    match (head.method.as_str(), head.path.as_str()) {
        ("GET", "/") => respond(
            &mut stream,
            "200 OK",
            "text/html; charset=utf-8",
            PAGE.as_bytes(),
        ),
        ("GET", "/api/metrics") => {
            let (tx, rx) = sync_channel(1);
            let json = requests
                .send(Request::Metrics(tx))
                .ok()
                .and_then(|()| rx.recv_timeout(Duration::from_secs(10)).ok());
            match json {
                Some(json) => respond(&mut stream, "200 OK", "application/json", json.as_bytes()),
                None => respond(
                    &mut stream,
                    "503 Service Unavailable",
                    "text/plain",
                    b"the run is gone\n",
                ),
            }
        }
        ("GET", _) => respond(&mut stream, "404 Not Found", "text/plain", b"not found\n"),
        _ => respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
        ),
    }
}

/// Sends `text` to the page as an error it shows.
fn error_text(message: &str) -> Message {
    Message::text(serde_json::json!({"type": "error", "message": message}).to_string())
}

/// The WebSocket: commands in, frames and texts out, on one thread (reads wait at most
/// [`WS_POLL`], then whatever the run sent goes out).
fn websocket(stream: TcpStream, requests: &Sender<Request>, tick_hz: u32) -> std::io::Result<()> {
    // Nothing the page sends is near this size: a larger message is refused before it
    // is buffered, not after.
    let limits = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    let mut ws: WebSocket<TcpStream> = tungstenite::accept_with_config(stream, Some(limits))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    ws.get_mut().set_read_timeout(Some(WS_POLL))?;
    let (tx, rx) = sync_channel(PAGE_QUEUE);
    if requests.send(Request::Subscribe(tx)).is_err() {
        return Ok(());
    }
    loop {
        let reply = match ws.read() {
            Ok(Message::Text(text)) => match parse_command(text.as_str(), tick_hz) {
                Ok(command) => {
                    if requests.send(Request::Command(command)).is_err() {
                        return Ok(());
                    }
                    None
                }
                Err(e) => Some(error_text(&e)),
            },
            Ok(Message::Binary(_)) => Some(error_text("binary messages are not accepted")),
            Ok(Message::Close(_)) => return Ok(()),
            Ok(_) => None,
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                None
            }
            // Anything else (a broken frame, a closed socket) ends this page's connection
            // and nothing more: the page shows it lost the connection.
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        };
        if let Some(reply) = reply {
            ws.send(reply)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let mut wrote = false;
        while let Ok(out) = rx.try_recv() {
            let message = match out {
                Outgoing::Frame(bytes) => Message::binary(bytes.as_slice().to_vec()),
                Outgoing::Text(text) => Message::text(text.as_str()),
            };
            ws.write(message)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            wrote = true;
        }
        if wrote {
            ws.flush()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_parse() {
        let h = parse_head(b"GET /api/metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").expect("head");
        assert_eq!(h.method, "GET");
        assert_eq!(h.path, "/api/metrics");
        assert!(!h.websocket);
        let h = parse_head(b"GET /ws HTTP/1.1\r\nUpgrade: WebSocket\r\n\r\nextra").expect("head");
        assert!(h.websocket);
        assert_eq!(h.len, 40);
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost:"), None);
        assert_eq!(parse_head(b"\xff\xfe\r\n\r\n"), None);
    }
}
