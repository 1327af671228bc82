//! A minimal Chrome DevTools Protocol client driving Debian's chromium,
//! headless, over tokio-tungstenite; and background traffic. Included by
//! the page tests (`#[path = "support/devtools.rs"] mod devtools;`, beside
//! `mod support;`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::support;

/// How long chromium may take to start and print its DevTools address.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one DevTools command may take to be answered.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the page may take to show what a test waits for (it polls
/// the service every 2 s).
const WAIT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// A minimal Chrome DevTools Protocol client.

/// A headless chromium process; killed when dropped.
pub(crate) struct Chromium {
    child: Child,
    /// What it wrote on its standard error (for failure messages).
    log: Arc<Mutex<Vec<String>>>,
    _profile: tempfile::TempDir,
}

impl Chromium {
    /// Starts chromium; returns it and the browser's DevTools WebSocket URL.
    pub(crate) async fn start() -> (Chromium, String) {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new(support::chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-port=0",
                "--window-size=1280,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let stderr = child.stderr.take().expect("chromium's stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (found, url) = tokio::sync::oneshot::channel::<String>();
        // Reads stderr to its end (chromium must never block on a full pipe).
        std::thread::spawn({
            let log = log.clone();
            move || {
                let mut found = Some(found);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(at) = line.find("DevTools listening on ") {
                        let url = line[at + "DevTools listening on ".len()..].trim().to_owned();
                        if let Some(found) = found.take() {
                            let _ = found.send(url);
                        }
                    }
                    log.lock().expect("log").push(line);
                }
            }
        });
        let chromium = Chromium { child, log, _profile: profile };
        match tokio::time::timeout(START_TIMEOUT, url).await {
            Ok(Ok(url)) => (chromium, url),
            Ok(Err(_)) => panic!("chromium ended without a DevTools address:\n{}", chromium.log()),
            Err(_) => panic!("no DevTools address from chromium in {START_TIMEOUT:?}:\n{}", chromium.log()),
        }
    }

    pub(crate) fn log(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One page (tab) of a chromium of its own, attached with a flat session.
pub(crate) struct Page {
    socket: Socket,
    session: String,
    next_id: u64,
    chromium: Chromium,
}

impl Page {
    /// Starts chromium and opens `url` in a new tab.
    pub(crate) async fn open(url: &str) -> Page {
        let (chromium, browser) = Chromium::start().await;
        let (socket, _) = tokio::time::timeout(COMMAND_TIMEOUT, tokio_tungstenite::connect_async(&browser))
            .await
            .expect("connecting to DevTools in time")
            .unwrap_or_else(|e| panic!("connect to {browser}: {e}"));
        let mut page = Page { socket, session: String::new(), next_id: 0, chromium };
        let target = page.browser_call("Target.createTarget", json!({ "url": url })).await;
        let target = target["targetId"].as_str().expect("targetId").to_owned();
        let attached =
            page.browser_call("Target.attachToTarget", json!({ "targetId": target, "flatten": true })).await;
        page.session = attached["sessionId"].as_str().expect("sessionId").to_owned();
        page
    }

    /// Sends `method` (to the page's session, or to the browser if
    /// `session` is false); its result, or the protocol's error. Events
    /// and answers to other commands are skipped.
    pub(crate) async fn send(&mut self, method: &str, params: Value, session: bool) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({ "id": id, "method": method, "params": params });
        if session {
            command["sessionId"] = Value::from(self.session.clone());
        }
        self.socket.send(Message::text(command.to_string())).await.expect("send to DevTools");
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, async {
            loop {
                match self.socket.next().await {
                    Some(Ok(Message::Text(text))) => {
                        let message: Value = serde_json::from_str(&text).expect("DevTools JSON");
                        if message["id"].as_u64() == Some(id) {
                            return message;
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => panic!("DevTools connection failed: {e}"),
                    None => panic!("DevTools connection closed"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to {method} in {COMMAND_TIMEOUT:?}:\n{}", self.chromium.log()));
        match answer.get("error") {
            Some(error) => Err(format!("{method}: {error}")),
            None => Ok(answer["result"].clone()),
        }
    }

    pub(crate) async fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false).await.unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Evaluates `expression` in the page (promises awaited); its value as
    /// JSON, or why it failed.
    pub(crate) async fn try_eval(&mut self, expression: &str) -> Result<Value, String> {
        let params = json!({ "expression": expression, "awaitPromise": true, "returnByValue": true });
        let result = self.send("Runtime.evaluate", params, true).await?;
        if let Some(exception) = result.get("exceptionDetails") {
            let description = exception["exception"]["description"].as_str().unwrap_or("");
            return Err(format!("{expression}: {} {description}", exception["text"]));
        }
        Ok(result["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    pub(crate) async fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression).await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Waits (at most [`WAIT`]) until `condition`, a JS expression, holds.
    pub(crate) async fn wait_for(&mut self, what: &str, condition: &str) {
        let deadline = Instant::now() + WAIT;
        let expression = format!("Boolean({condition})");
        let mut last = Ok(Value::Null);
        while Instant::now() < deadline {
            // Errors (the page still loading) are retried.
            last = self.try_eval(&expression).await;
            if last == Ok(Value::Bool(true)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let state = self.try_eval(STATE).await;
        panic!("timed out waiting for {what} ({condition}): last {last:?}; the page: {state:?}");
    }

    /// Clicks the element `selector` names, with the mouse, at its centre:
    /// it must be shown (a hidden button cannot be clicked).
    pub(crate) async fn click(&mut self, selector: &str) {
        let point = self
            .eval(&format!(
                "(() => {{
                   const element = document.querySelector({selector});
                   if (!element || !element.checkVisibility()) return null;
                   element.scrollIntoView({{ block: 'center' }});
                   const r = element.getBoundingClientRect();
                   const x = r.left + r.width / 2, y = r.top + r.height / 2;
                   const hit = document.elementFromPoint(x, y);
                   return {{ x, y, hit: hit === element || element.contains(hit) }};
                 }})()",
                selector = Value::from(selector)
            ))
            .await;
        assert!(point.is_object(), "{selector} is shown, so it can be clicked");
        assert_eq!(point["hit"], true, "{selector} is on top where it is clicked");
        let (x, y) = (point["x"].clone(), point["y"].clone());
        self.call("Input.dispatchMouseEvent", json!({ "type": "mouseMoved", "x": x, "y": y })).await;
        for kind in ["mousePressed", "mouseReleased"] {
            let event = json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 });
            self.call("Input.dispatchMouseEvent", event).await;
        }
    }

    /// Types `text` into the (emptied) input `selector`, as a keyboard would.
    pub(crate) async fn type_into(&mut self, selector: &str, text: &str) {
        let selector_js = Value::from(selector);
        self.click(selector).await;
        self.eval(&format!(
            "(() => {{ const input = document.querySelector({selector_js}); input.focus(); input.select(); }})()"
        ))
        .await;
        self.call("Input.insertText", json!({ "text": text })).await;
        let value = self.eval(&format!("document.querySelector({selector_js}).value")).await;
        assert_eq!(value, text, "{selector} holds what was typed");
    }

    /// The text of the element `selector` names.
    pub(crate) async fn text(&mut self, selector: &str) -> String {
        let value =
            self.eval(&format!("document.querySelector({}).textContent", Value::from(selector))).await;
        value.as_str().unwrap_or_else(|| panic!("no {selector}: {value}")).to_owned()
    }

    /// The whole page as a PNG.
    pub(crate) async fn screenshot(&mut self) -> Vec<u8> {
        let metrics = self.call("Page.getLayoutMetrics", json!({})).await;
        let size = &metrics["cssContentSize"];
        let clip = json!({ "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 });
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "clip": clip, "captureBeyondViewport": true }),
            )
            .await;
        base64_decode(shot["data"].as_str().expect("screenshot data"))
    }
}

/// What the page shows of itself, for failure messages.
pub(crate) const STATE: &str = "JSON.stringify({
  loaded: document.body && document.body.dataset.loaded,
  updated: document.getElementById('updated')?.textContent,
  adminResult: document.getElementById('admin-result')?.textContent,
  configHash: document.getElementById('config-hash')?.textContent,
  gateway: document.getElementById('routes')?.innerText,
})";

pub(crate) fn base64_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => panic!("not base64: {c}"),
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).expect("a byte"));
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Where a screenshot goes: `$CARGO_TARGET_DIR`, or the workspace's target/.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

// ---------------------------------------------------------------------------
// Traffic.

/// Sends requests in the background until dropped.
pub(crate) struct Traffic {
    running: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Traffic {
    /// `send` every 100 ms.
    pub(crate) fn start<F>(send: impl Fn() -> F + Send + 'static) -> Traffic
    where
        F: Future<Output = ()> + Send,
    {
        let running = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn({
            let running = running.clone();
            async move {
                while running.load(Ordering::Relaxed) {
                    send().await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        Traffic { running, task }
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        self.task.abort();
    }
}
