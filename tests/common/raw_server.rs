//! A tiny HTTP/1.1 server on plain sockets, for servers that misbehave in ways a real
//! framework will not: closing kept-alive connections, cutting a line short, odd framing.
//! Each connection runs on its own thread; every request read is counted and kept.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// The request line and headers, lower-cased.
    pub head: String,
    pub body: Vec<u8>,
}

impl RawRequest {
    /// The value of a (lower-case) header, if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim())
        })
    }
}

/// What to do with the connection after the reply's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Read the next request.
    KeepOpen,
    /// Close the socket (FIN), whatever the headers said.
    Close,
    /// Wait this long, reading nothing, then close: a request sent meanwhile stays unread,
    /// so the close is a reset.
    CloseLater(Duration),
    /// Wait this long, then end the write side (FIN) and read and drop whatever arrives for
    /// 100 ms before closing, as llama.cpp's server (cpp-httplib) does after each stream: no
    /// reset, and a request sent meanwhile is read but never answered.
    DrainLater(Duration),
    /// Close with a TCP reset (RST).
    Reset,
}

/// The bytes of a reply, written one piece at a time with `gap` between pieces.
#[derive(Debug, Clone)]
pub struct Reply {
    pub pieces: Vec<Vec<u8>>,
    pub gap: Duration,
    pub after: After,
}

impl Reply {
    pub fn new(pieces: Vec<Vec<u8>>, after: After) -> Self {
        Reply {
            pieces,
            gap: Duration::ZERO,
            after,
        }
    }
}

type Handler = dyn Fn(&RawRequest) -> Reply + Send + Sync;

pub struct RawServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<RawRequest>>>,
    connections: Arc<Mutex<usize>>,
}

impl RawServer {
    /// Listens on a free port; `handler` answers every request.
    pub fn start(handler: impl Fn(&RawRequest) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (seen, opened) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { return };
                *opened.lock().unwrap() += 1;
                let (seen, handler) = (seen.clone(), handler.clone());
                std::thread::spawn(move || serve(tcp, &seen, &*handler));
            }
        });
        RawServer {
            url,
            requests,
            connections,
        }
    }

    /// Requests read so far.
    pub fn requests(&self) -> Vec<RawRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

fn serve(mut tcp: TcpStream, seen: &Mutex<Vec<RawRequest>>, handler: &Handler) {
    tcp.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut tcp, &mut buf) else {
            return;
        };
        seen.lock().unwrap().push(request.clone());
        let reply = handler(&request);
        for (i, piece) in reply.pieces.iter().enumerate() {
            if i > 0 && !reply.gap.is_zero() {
                std::thread::sleep(reply.gap);
            }
            if tcp.write_all(piece).is_err() {
                return;
            }
        }
        match reply.after {
            After::KeepOpen => {}
            After::Close => return,
            After::CloseLater(wait) => {
                std::thread::sleep(wait);
                return;
            }
            After::DrainLater(wait) => {
                std::thread::sleep(wait);
                let _ = tcp.shutdown(std::net::Shutdown::Write);
                let _ = tcp.set_read_timeout(Some(Duration::from_millis(100)));
                let start = std::time::Instant::now();
                let mut sink = [0u8; 4096];
                while start.elapsed() < Duration::from_millis(100)
                    && matches!(tcp.read(&mut sink), Ok(n) if n > 0)
                {}
                return;
            }
            After::Reset => {
                // SO_LINGER 0: close() sends RST instead of FIN.
                let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
                return;
            }
        }
    }
}

/// Reads one request (headers and a Content-Length body); `None` at EOF or on an error.
fn read_request(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RawRequest> {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + len {
                let n = tcp.read(&mut chunk).ok().filter(|&n| n > 0)?;
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(RawRequest { head, body });
        }
        let n = tcp.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One chunk of a chunked body.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    [format!("{:x}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat()
}

/// The end of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// A `data:` event carrying one chat-completion token.
pub fn token_event(text: &str) -> String {
    format!(
        "data: {}\n\n",
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]})
    )
}

/// A streamed 200 reply: headers (`extra` lines added), each event in its own chunk, then
/// the last chunk.
pub fn sse_reply(extra: &str, events: &[String], after: After) -> Reply {
    let mut pieces = vec![
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n{extra}\r\n"
        )
        .into_bytes(),
    ];
    pieces.extend(events.iter().map(|e| chunk(e.as_bytes())));
    pieces.push(LAST_CHUNK.to_vec());
    Reply::new(pieces, after)
}

/// A whole (non-streamed) 200 JSON reply with a Content-Length.
pub fn json_reply(extra: &str, body: &serde_json::Value, after: After) -> Reply {
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra}\r\n",
        body.len()
    );
    Reply::new(vec![[head.as_bytes(), body.as_bytes()].concat()], after)
}
