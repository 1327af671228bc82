//! What every listener puts between an accepted socket and hyper:
//! [`HeaderBlocks`], which closes an HTTP/2 connection whose header block
//! does not complete in time, and [`Unvectored`], which turns vectored
//! writes off.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

#[cfg(test)]
mod unvectored_twin;

/// The client preface every HTTP/2 connection starts with (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The length of an HTTP/2 frame's header.
const FRAME_HEADER: usize = 9;

const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// A socket whose reads are watched for HTTP/2 header blocks (a HEADERS
/// frame and its CONTINUATIONs): one that does not end within `limit` of
/// its first frame fails the next read with `TimedOut`, and the
/// connection closes. hyper bounds an HTTP/1.1 head with its own timer;
/// HTTP/2 has none, and a client that never ends a header block would
/// hold its connection, and the memory of the headers so far, for good.
///
/// Only the frame headers are looked at (9 bytes a frame; payloads are
/// skipped), and only on a connection that opened with HTTP/2's preface.
pub(crate) struct HeaderBlocks<T> {
    io: T,
    limit: Duration,
    frames: Frames,
    /// When the open header block must have ended (armed while one is open).
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<T> HeaderBlocks<T> {
    pub(crate) fn new(io: T, limit: Duration) -> HeaderBlocks<T> {
        HeaderBlocks { io, limit, frames: Frames::default(), deadline: None }
    }
}

/// Where a connection's byte stream is, as far as header blocks go.
#[derive(Debug, Default)]
struct Frames {
    /// Bytes of the preface seen so far; past its length, frames follow.
    preface: usize,
    /// Not HTTP/2 (or not understood): nothing more is looked at.
    off: bool,
    /// The frame header being read, and how much of it has come.
    header: [u8; FRAME_HEADER],
    header_len: usize,
    /// Payload bytes of the current frame still to come (skipped).
    payload_left: usize,
    /// Whether a header block has begun and not ended.
    open_block: bool,
}

impl Frames {
    /// Follows `bytes`, the next ones read.
    fn read(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.off {
            if self.preface < PREFACE.len() {
                let take = bytes.len().min(PREFACE.len() - self.preface);
                if bytes[..take] != PREFACE[self.preface..self.preface + take] {
                    self.off = true;
                    return;
                }
                self.preface += take;
                bytes = &bytes[take..];
            } else if self.payload_left > 0 {
                let skip = bytes.len().min(self.payload_left);
                self.payload_left -= skip;
                bytes = &bytes[skip..];
            } else {
                let take = bytes.len().min(FRAME_HEADER - self.header_len);
                self.header[self.header_len..self.header_len + take].copy_from_slice(&bytes[..take]);
                self.header_len += take;
                bytes = &bytes[take..];
                if self.header_len == FRAME_HEADER {
                    self.header_len = 0;
                    self.frame();
                }
            }
        }
    }

    /// A whole frame header has come.
    fn frame(&mut self) {
        let [l0, l1, l2, kind, flags, ..] = self.header;
        self.payload_left = usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2);
        let ends = flags & END_HEADERS != 0;
        match kind {
            HEADERS | PUSH_PROMISE => self.open_block = !ends,
            CONTINUATION if ends => self.open_block = false,
            _ => {}
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for HeaderBlocks<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut().filter(|_| this.frames.open_block)
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "an HTTP/2 header block did not end within the header timeout",
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.frames.off {
            return polled;
        }
        let was_open = this.frames.open_block;
        this.frames.read(&buf.filled()[before..]);
        if this.frames.open_block && !was_open {
            let at = Instant::now() + this.limit;
            match &mut this.deadline {
                Some(deadline) => deadline.as_mut().reset(at),
                None => this.deadline = Some(Box::pin(tokio::time::sleep_until(at))),
            }
            // Polled once, so that it wakes this reader when it passes.
            if let Some(deadline) = this.deadline.as_mut() {
                let _ = deadline.as_mut().poll(cx);
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeaderBlocks<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A connection's socket as hyper sees it, without vectored writes. Over
/// HTTP/2, `h2` then copies DATA payloads of up to 1 KiB into its write
/// buffer (with vectored writes only up to 256 bytes, and a larger payload
/// must be written out before the next frame is queued): a JSON answer of
/// about 500 bytes cost a `writev` per answer, where copied, the answers
/// of a batch leave together (measured: 1.06 → 0.06 writes per `/v1/check`
/// over h2c). HTTP/1.1 answers are then copied behind their head: one
/// write either way.
pub(crate) struct Unvectored<T>(pub(crate) T);

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Unvectored<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Unvectored<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: usize) -> Vec<u8> {
        let len = u32::try_from(payload).unwrap().to_be_bytes();
        let mut bytes = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 1];
        bytes.resize(FRAME_HEADER + payload, 0xAB);
        bytes
    }

    /// Follows `stream` fed `chunk` bytes at a time; whether a block is open after each chunk.
    fn follow(stream: &[u8], chunk: usize) -> Vec<bool> {
        let mut frames = Frames::default();
        stream
            .chunks(chunk)
            .map(|c| {
                frames.read(c);
                frames.open_block
            })
            .collect()
    }

    #[test]
    fn a_header_block_is_open_from_its_headers_to_its_last_continuation() {
        let mut stream = PREFACE.to_vec();
        stream.extend(frame(0x4, 0, 6)); // SETTINGS
        let opened = stream.len() + FRAME_HEADER;
        stream.extend(frame(HEADERS, 0, 100));
        stream.extend(frame(CONTINUATION, 0, 50));
        let closed = stream.len() + FRAME_HEADER;
        stream.extend(frame(CONTINUATION, END_HEADERS, 20));
        stream.extend(frame(0x0, 0x1, 300)); // DATA, END_STREAM
        stream.extend(frame(HEADERS, END_HEADERS | 0x1, 30));
        for chunk in [1, 2, 7, 9, 64, stream.len()] {
            let open = follow(&stream, chunk);
            for (i, open) in open.iter().enumerate() {
                let end = ((i + 1) * chunk).min(stream.len());
                assert_eq!(*open, end >= opened && end < closed, "chunks of {chunk}, after byte {end}");
            }
        }
    }

    #[test]
    fn http1_is_not_looked_at() {
        let mut frames = Frames::default();
        frames.read(b"POST /v1/check HTTP/1.1\r\n");
        assert!(frames.off && !frames.open_block);
        frames.read(&frame(HEADERS, 0, 0));
        assert!(!frames.open_block);
    }
}
