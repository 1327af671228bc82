//! The twin of [`Unvectored`]: what reaches the client is the same bytes
//! with it as with the socket's own vectored writes — for a vectored
//! write itself, and for hyper's answers over HTTP/1.1 and HTTP/2, which
//! hyper and `h2` write differently when the socket takes no vectored
//! writes (copied into one buffer instead of queued).

use std::convert::Infallible;
use std::future::poll_fn;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::rt::Write as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::Unvectored;

/// A connected pair of loopback sockets: (accepted, connecting).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let connecting = TcpStream::connect(listener.local_addr().expect("its address"));
    let (accepted, connected) = tokio::join!(listener.accept(), connecting);
    (accepted.expect("accept").0, connected.expect("connect"))
}

/// Writes all of `slices` with vectored writes (each taking what it
/// takes), then closes the writing side.
async fn write_vectored<T: hyper::rt::Write + Unpin>(mut io: T, slices: &[&[u8]]) {
    let (mut at, mut offset) = (0, 0);
    while at < slices.len() {
        let mut left: Vec<IoSlice<'_>> = vec![IoSlice::new(&slices[at][offset..])];
        left.extend(slices[at + 1..].iter().map(|s| IoSlice::new(s)));
        let mut written =
            poll_fn(|cx| Pin::new(&mut io).poll_write_vectored(cx, &left)).await.expect("write");
        while at < slices.len() && written >= slices[at].len() - offset {
            written -= slices[at].len() - offset;
            (at, offset) = (at + 1, 0);
        }
        offset += written;
    }
    poll_fn(|cx| Pin::new(&mut io).poll_shutdown(cx)).await.expect("shut down");
}

/// What the other end of a socket reads of `slices` written vectored,
/// through [`Unvectored`] or not.
async fn received(slices: &[&[u8]], unvectored: bool) -> Vec<u8> {
    let (server, mut client) = pair().await;
    let io = TokioIo::new(server);
    let writing = async {
        if unvectored {
            write_vectored(Unvectored(io), slices).await;
        } else {
            assert!(io.is_write_vectored(), "the socket takes vectored writes");
            write_vectored(io, slices).await;
        }
    };
    let mut bytes = Vec::new();
    let (_, read) = tokio::join!(writing, client.read_to_end(&mut bytes));
    read.expect("read");
    bytes
}

#[tokio::test]
async fn a_vectored_write_puts_the_same_bytes_on_the_wire() {
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    let layouts: [&[&[u8]]; 4] = [
        &[b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", b"hello"],
        &[b"", b"a", b"", b"bc", b"def", b""],
        &[&big[..7], &big[7..70_000], &big[70_000..70_001], &big[70_001..]],
        &[&big, b"tail"],
    ];
    for slices in layouts {
        let expected = slices.concat();
        let plain = received(slices, false).await;
        assert!(plain == expected, "the socket's own writes: {} bytes of {}", plain.len(), expected.len());
        let unvectored = received(slices, true).await;
        assert!(unvectored == plain, "through Unvectored: {} bytes of {}", unvectored.len(), plain.len());
    }
}

/// hyper's answer to a request for `path`: a body of one small frame, of
/// several frames (of sizes around `h2`'s 1 KiB copy limit), or large.
async fn answer(
    request: http::Request<Incoming>,
) -> Result<http::Response<http_body_util::combinators::BoxBody<Bytes, Infallible>>, Infallible> {
    let frames = |sizes: &[usize]| {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| Ok(Frame::data(Bytes::from(vec![b'a' + i as u8; size]))))
            .collect();
        StreamBody::new(futures::stream::iter(frames)).boxed()
    };
    let body = match request.uri().path() {
        "/frames" => frames(&[1, 255, 256, 257, 1023, 1024, 1025, 5000]),
        "/large" => frames(&[300_000]),
        _ => Full::new(Bytes::from(vec![b'{'; 480])).boxed(),
    };
    let mut response = http::Response::new(body);
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    headers.append("x-ratelimit-remaining", http::HeaderValue::from_static("7"));
    Ok(response)
}

/// Serves one connection on a loopback port, HTTP/1.1 or HTTP/2 (no
/// `date`: it changes with the second), through [`Unvectored`] or not.
async fn server(http2: bool, unvectored: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else { return };
        let service = hyper::service::service_fn(answer);
        let io = TokioIo::new(stream);
        if http2 {
            let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            builder.auto_date_header(false);
            let _ = if unvectored {
                builder.serve_connection(Unvectored(io), service).await
            } else {
                builder.serve_connection(io, service).await
            };
        } else {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.auto_date_header(false);
            let _ = if unvectored {
                builder.serve_connection(Unvectored(io), service).await
            } else {
                builder.serve_connection(io, service).await
            };
        }
    });
    addr
}

/// Everything an HTTP/1.1 server sends back for `GET` requests of
/// `paths`, in turn on one connection (the last one closing it).
async fn over_http1(addr: SocketAddr, paths: &[&str]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut requests = String::new();
    for (i, path) in paths.iter().enumerate() {
        let close = if i + 1 == paths.len() { "connection: close\r\n" } else { "" };
        requests.push_str(&format!("GET {path} HTTP/1.1\r\nhost: test\r\n{close}\r\n"));
    }
    stream.write_all(requests.as_bytes()).await.expect("write");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).await.expect("read");
    bytes
}

/// One HTTP/2 frame's header.
fn frame_header(length: usize, kind: u8, flags: u8, stream: u32) -> Vec<u8> {
    let length = u32::try_from(length).expect("a frame's length").to_be_bytes();
    let mut header = vec![length[1], length[2], length[3], kind, flags];
    header.extend_from_slice(&stream.to_be_bytes());
    header
}

/// The frames an HTTP/2 server sends for one `GET` of `path` on stream 1
/// (the client's preface, empty settings and request sent at once), up to
/// the end of the answer's stream; a window as large as it may be, so
/// that flow control asks for nothing in between.
async fn over_http2(addr: SocketAddr, path: &str) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let mut hello = super::PREFACE.to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE = 2^31 - 1, and the connection's window raised as far.
    hello.extend(frame_header(6, 0x4, 0, 0));
    hello.extend_from_slice(&[0, 4, 0x7f, 0xff, 0xff, 0xff]);
    hello.extend(frame_header(4, 0x8, 0, 0));
    hello.extend_from_slice(&(0x7fff_ffffu32 - 65_535).to_be_bytes());
    // HPACK: GET, http, :authority test, :path literal (not indexed, not Huffman).
    let mut block = vec![0x82, 0x86, 0x41, 4];
    block.extend_from_slice(b"test");
    block.push(0x04);
    block.push(u8::try_from(path.len()).expect("a short path"));
    block.extend_from_slice(path.as_bytes());
    hello.extend(frame_header(block.len(), 0x1, 0x4 | 0x1, 1));
    hello.extend(block);
    stream.write_all(&hello).await.expect("write");
    let mut frames = Vec::new();
    loop {
        let mut header = [0; 9];
        stream.read_exact(&mut header).await.expect("a frame header");
        let length = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let (kind, flags) = (header[3], header[4]);
        let id = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let mut payload = vec![0; length];
        stream.read_exact(&mut payload).await.expect("a frame payload");
        frames.push((kind, flags, id, payload));
        if id == 1 && flags & 0x1 != 0 {
            return frames;
        }
    }
}

#[tokio::test]
async fn hypers_answers_are_the_same_bytes_through_unvectored() {
    let paths = ["/small", "/frames", "/large", "/small"];
    let plain = over_http1(server(false, false).await, &paths).await;
    let unvectored = over_http1(server(false, true).await, &paths).await;
    assert!(plain.len() > 300_000, "every answer came: {} bytes", plain.len());
    assert!(plain == unvectored, "HTTP/1.1: {} bytes, through Unvectored {}", plain.len(), unvectored.len());
    for path in paths {
        let plain = over_http2(server(true, false).await, path).await;
        let unvectored = over_http2(server(true, true).await, path).await;
        assert_eq!(plain.len(), unvectored.len(), "HTTP/2 {path}: as many frames");
        for (i, (plain, unvectored)) in plain.iter().zip(&unvectored).enumerate() {
            assert!(
                plain == unvectored,
                "HTTP/2 {path}: frame {i} differs (type {} vs {})",
                plain.0,
                unvectored.0
            );
        }
    }
}
