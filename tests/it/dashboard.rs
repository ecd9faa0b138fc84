//! The dashboard in a real terminal: the real binary runs in tmux against the mock server,
//! the screen is read mid-run, keys are sent as a user types them, and after the run the
//! terminal is the shell's again with the usual tables on it.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::raw_server::{After, RawServer, Reply};
use crate::common::{BIN, MockChild};

/// A tmux server of the test's own (its socket name), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `command` in a 140x45 terminal; `None` (with a notice) without tmux, unless
    /// `AIPERF_REQUIRE_TMUX=1` makes that a failure.
    fn start(name: &str, command: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                std::env::var("AIPERF_REQUIRE_TMUX").as_deref() != Ok("1"),
                "AIPERF_REQUIRE_TMUX=1 but no tmux on PATH"
            );
            eprintln!("NOTICE: tmux not found; the dashboard terminal tests are skipped");
            return None;
        }
        let tmux = Tmux {
            socket: format!("aiperf-{name}-{}", std::process::id()),
        };
        let status = tmux
            .cmd()
            .args(["new-session", "-d", "-x", "140", "-y", "45", command])
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .status()
            .expect("run tmux");
        assert!(status.success());
        Some(tmux)
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    /// The visible screen.
    fn screen(&self) -> String {
        self.capture(&["capture-pane", "-p"])
    }

    /// The whole pane: what scrolled off the top and the screen.
    fn scrollback(&self) -> String {
        self.capture(&["capture-pane", "-p", "-S", "-"])
    }

    fn capture(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).output().expect("capture-pane");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pid of the `aiperf` the pane's shell runs.
    fn aiperf_pid(&self) -> String {
        let out = self
            .cmd()
            .args(["list-panes", "-F", "#{pane_pid}"])
            .output()
            .unwrap();
        let shell = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let out = Command::new("pgrep")
            .args(["-P", &shell, "aiperf"])
            .output()
            .expect("pgrep");
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!pid.is_empty(), "no aiperf under the pane's shell {shell}");
        pid
    }

    fn keys(&self, keys: &str) {
        assert!(
            self.cmd()
                .args(["send-keys", keys])
                .status()
                .unwrap()
                .success()
        );
    }

    /// Waits until the screen satisfies `ok`; the last screen on timeout.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait_for_in(what, Tmux::screen, ok)
    }

    fn wait_for_in(
        &self,
        what: &str,
        read: fn(&Tmux) -> String,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = read(self);
            if ok(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "no {what} on screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// A DCGM exporter with one GPU: 250 W, 93% busy, 10,240 MiB used, 61 °C.
fn dcgm_exporter() -> RawServer {
    RawServer::start(|_| {
        let labels = "gpu=\"0\",UUID=\"GPU-1\",modelName=\"NVIDIA H100\",Hostname=\"n1\"";
        let body = [
            ("DCGM_FI_DEV_POWER_USAGE", 250.0),
            ("DCGM_FI_DEV_GPU_UTIL", 93.0),
            ("DCGM_FI_DEV_FB_USED", 10240.0),
            ("DCGM_FI_DEV_GPU_TEMP", 61.0),
        ]
        .map(|(name, v)| format!("# TYPE {name} gauge\n{name}{{{labels}}} {v}\n"))
        .concat();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        Reply::new(vec![head.into_bytes(), body.into_bytes()], After::KeepOpen)
    })
}

/// The profile command line, run in `dir`, that writes its exit code to `dir/exit`.
fn shell_command(dir: &Path, url: &str, extra: &str) -> String {
    format!(
        "cd {dir} && {BIN} profile --model dash-model --endpoint-type chat --streaming \
         --url {url} --synthetic-input-tokens-mean 20 --output-tokens-mean 40 \
         --artifact-dir {dir}/out {extra}; echo $? > {dir}/exit; sleep 600",
        dir = dir.display()
    )
}

fn exit_code(dir: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("exit"))
            && let Ok(code) = text.trim().parse()
        {
            return code;
        }
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The number in `column` (0 = first after the name) of the screen row starting with `name`.
fn row_value(screen: &str, name: &str, column: usize) -> f64 {
    let line = screen
        .lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no {name} row in\n{screen}"));
    let after = &line[line.find(name).unwrap() + name.len()..];
    after
        .split(|c: char| c.is_whitespace() || c == '|' || c == '│')
        .filter(|w| !w.is_empty())
        .nth(column)
        .and_then(|w| w.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no number {column} in {line}"))
}

#[test]
fn a_run_in_a_terminal_shows_the_dashboard_then_its_tables() {
    // 40 tokens at 5 ms each after a 20 ms TTFT: ~0.22 s a request, 2 at a time, 120
    // requests: a run of ~13 s, and 3% of requests fail.
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "5", "--error-rate", "3"]);
    let gpu = dcgm_exporter();
    let dir = tempfile::tempdir().unwrap();
    let command = shell_command(
        dir.path(),
        &mock.url,
        &format!(
            "--request-count 120 --concurrency 2 --warmup-request-count 4 --gpu-telemetry {}/metrics",
            gpu.url
        ),
    );
    let Some(tmux) = Tmux::start("run", &command) else {
        return;
    };
    let screen = tmux.wait_for("live TTFT figures", |s| {
        s.contains("Real-Time Metrics")
            && s.lines()
                .any(|l| l.contains("Time to First Token") && !l.contains("N/A"))
    });
    // The header names the run; the warmup is done; profiling is under way.
    assert!(
        screen.contains("dash-model · chat · concurrency 2"),
        "{screen}"
    );
    assert!(screen.contains("Warmup 4/4 (100%)"), "{screen}");
    assert!(screen.contains("Profiling "), "{screen}");
    // Live TTFT p50 near the mock's 20 ms; request latency near 20 + 39 x 5 = 215 ms.
    let ttft = row_value(&screen, "Time to First Token", 0);
    assert!((19.0..60.0).contains(&ttft), "TTFT p50 {ttft}\n{screen}");
    let latency = row_value(&screen, "Request Latency", 0);
    assert!(
        (200.0..400.0).contains(&latency),
        "latency p50 {latency}\n{screen}"
    );
    // The mock's /metrics is scraped by default: its gauges show beside ours.
    assert!(
        screen.contains("running 2") || screen.contains("running 1"),
        "{screen}"
    );
    assert!(screen.contains("client CPU"), "{screen}");
    // The DCGM exporter's GPU, as scraped.
    let gpu_line = screen
        .lines()
        .find(|l| l.contains("GPU0 NVIDIA H100"))
        .unwrap_or_else(|| panic!("no GPU line in\n{screen}"));
    for figure in [
        "power 250 W",
        "utilization 93%",
        "memory used 10.7 GB",
        "61 °C",
    ] {
        assert!(gpu_line.contains(figure), "{figure} in {gpu_line}");
    }
    assert!(
        screen.contains("Profiling: 120 requests"),
        "the log panel: {screen}"
    );

    // 3 maximises the metrics; Esc restores the overview.
    tmux.keys("3");
    tmux.wait_for("the metrics panel alone", |s| {
        s.contains("Real-Time Metrics") && !s.contains("Profile Progress")
    });
    tmux.keys("Escape");
    tmux.wait_for("the overview again", |s| s.contains("Profile Progress"));

    // A smaller window: the panels are laid out again within it.
    assert!(
        tmux.cmd()
            .args(["resize-window", "-x", "100", "-y", "30"])
            .status()
            .unwrap()
            .success()
    );
    let small = tmux.wait_for("the panels in 100 columns", |s| {
        s.lines()
            .any(|l| l.starts_with('└') && l.chars().count() == 100)
    });
    assert!(small.contains("Profile Progress"), "{small}");
    assert!(small.lines().all(|l| l.chars().count() <= 100), "{small}");

    // Failed requests show by type once some came (3% of 120).
    let failed = tmux.wait_for("an error count", |s| s.contains("Internal Server Error:"));
    assert!(!failed.contains("Errors 0\n"), "{failed}");

    assert_eq!(exit_code(dir.path()), 0);
    // Back on the normal screen: the console tables, the dashboard gone.
    let after = tmux.wait_for_in("the results table", Tmux::scrollback, |s| {
        s.contains("NVIDIA AIPerf | LLM Metrics")
    });
    assert!(!after.contains("Real-Time Metrics"), "{after}");
    // The log lines the panel showed are on the console too.
    assert!(after.contains("INFO Profiling: 120 requests"), "{after}");
    let summary = crate::common::read_json(&dir.path().join("out/profile_export_aiperf.json"));
    let count = summary["request_count"]["avg"].as_f64().unwrap()
        + summary["error_request_count"]["avg"]
            .as_f64()
            .unwrap_or(0.0);
    assert_eq!(count, 120.0);
}

/// A key that stops the run: as Ctrl-C without the dashboard, no new requests, those in
/// flight finish, everything is written, exit 130.
fn stop_with(key: &str) {
    let mock = MockChild::spawn(&["--ttft", "20", "--itl", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let command = shell_command(
        dir.path(),
        &mock.url,
        "--request-count 100000 --concurrency 2",
    );
    let Some(tmux) = Tmux::start(&key.replace('-', ""), &command) else {
        return;
    };
    tmux.wait_for("completed requests", |s| {
        s.lines()
            .any(|l| l.contains("Completed ") && !l.contains("Completed 0 "))
    });
    let (code, line) = match key {
        // `timeout`, docker and Kubernetes stop a run with SIGTERM.
        "SIGTERM" => {
            let aiperf = tmux.aiperf_pid();
            assert!(
                Command::new("kill")
                    .args(["-TERM", &aiperf])
                    .status()
                    .unwrap()
                    .success()
            );
            (143, "Terminated: the results written are partial")
        }
        _ => {
            tmux.keys(key);
            (130, "Interrupted: the results written are partial")
        }
    };
    assert_eq!(exit_code(dir.path()), code);
    let after = tmux.wait_for_in("the results table", Tmux::scrollback, |s| {
        s.contains("NVIDIA AIPerf | LLM Metrics")
    });
    assert!(after.contains(line), "{after}");
    assert!(
        !after.contains("Real-Time Metrics"),
        "the terminal is restored: {after}"
    );
    let summary = crate::common::read_json(&dir.path().join("out/profile_export_aiperf.json"));
    let done = summary["request_count"]["avg"].as_f64().unwrap();
    assert!((1.0..100_000.0).contains(&done), "{done}");
}

#[test]
fn sigterm_ends_the_run_and_gives_the_terminal_back() {
    stop_with("SIGTERM");
}

#[test]
fn q_stops_the_run_as_ctrl_c_does_and_the_results_are_written() {
    stop_with("q");
}

#[test]
fn ctrl_c_in_the_raw_terminal_still_stops_the_run() {
    // In raw mode the terminal sends Ctrl-C as a key, not as SIGINT.
    stop_with("C-c");
}
