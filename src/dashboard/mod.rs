//! The live dashboard (`--ui-type dashboard`, the default in a terminal): a full-screen view
//! of the run drawn on its own thread a few times a second from the snapshots the collector
//! publishes, so it never waits on, or slows, the requests.
//!
//! The terminal is restored on every way out: the run ending, Ctrl-C or `q` (sent on as
//! SIGINT, so the run stops as it does without the dashboard), SIGTERM, a panic, and the
//! third Ctrl-C's immediate exit ([`restore_terminal`]).

mod scraped;
pub mod view;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};

use crate::clock::Clock;
use crate::metrics::live::LiveBoard;
use crate::ui;
pub use scraped::{gpu_views, server_view};
pub use view::{ClientUsage, GpuView, Plan, ServerView};
use view::{Panel, Screen, View};

/// Frames per second: 5 Hz reads live figures without costing the client measurable CPU.
const FRAME_EVERY: Duration = Duration::from_millis(200);

/// True while the dashboard owns the terminal (raw mode, alternate screen).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Gives the terminal back (leaves raw mode and the alternate screen, shows the cursor);
/// nothing when the dashboard is not up. Safe to call from a panic hook or before `exit`.
pub fn restore_terminal() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = execute!(
            std::io::stderr(),
            terminal::LeaveAlternateScreen,
            cursor::Show
        );
        ui::release_console_log();
    }
}

/// Where the dashboard's figures come from, besides the collector's snapshots.
pub struct Sources {
    pub title: String,
    pub plan: Plan,
    pub board: Arc<LiveBoard>,
    pub clock: Clock,
    /// Requests in flight now.
    pub in_flight: Box<dyn Fn() -> u64 + Send>,
    /// The latest server and GPU readings, when scraped.
    pub servers: Box<dyn Fn() -> Vec<ServerView> + Send>,
    pub gpus: Box<dyn Fn() -> Vec<GpuView> + Send>,
}

/// The running dashboard.
pub struct Dashboard {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dashboard {
    /// Takes over the terminal (stderr) and starts drawing.
    pub fn start(sources: Sources) -> std::io::Result<Dashboard> {
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        if let Err(e) = execute!(
            std::io::stderr(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        ) {
            restore_terminal();
            return Err(e);
        }
        install_panic_hook();
        ui::capture_console_log();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("dashboard".into())
                .spawn(move || {
                    if let Err(e) = draw_until(&stop, sources) {
                        restore_terminal();
                        tracing::warn!("The dashboard stopped: {e}");
                    }
                })
        };
        match thread {
            Ok(t) => Ok(Dashboard {
                stop,
                thread: Some(t),
            }),
            Err(e) => {
                restore_terminal();
                Err(e)
            }
        }
    }

    /// Draws a last frame, gives the terminal back and prints the log lines of the run.
    pub fn finish(mut self) {
        self.stop_and_restore();
    }

    fn stop_and_restore(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // What the log panel showed is kept on the console too (it is in the log file).
        let lines = ui::captured_log(usize::MAX);
        restore_terminal();
        let mut err = std::io::stderr().lock();
        for line in lines {
            let _ = writeln!(err, "{line}");
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.stop_and_restore();
    }
}

/// A panic restores the terminal before its message prints (it would be lost in raw mode
/// on the alternate screen).
fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
    });
}

/// The drawing loop: a frame every [`FRAME_EVERY`], keys handled between frames.
fn draw_until(stop: &AtomicBool, sources: Sources) -> std::io::Result<()> {
    // Cleared by escape code, not `Terminal::clear`: that asks the terminal where its cursor
    // is and waits 2 s for an answer some never give (a bare pseudo-terminal).
    execute!(std::io::stderr(), terminal::Clear(terminal::ClearType::All))?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stderr()))?;
    let started = Instant::now();
    let mut view = View::default();
    let mut cpu = CpuMeter::new();
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut frames = 0u64;
    loop {
        let screen = gather(&sources, started, &mut cpu, colour);
        terminal.draw(|f| view::render(f, &screen, &view))?;
        frames += 1;
        if stop.load(Ordering::SeqCst) {
            // What drawing cost the client (benches/live_views.rs reads this line).
            tracing::info!(
                "Dashboard: {frames} frames; the dashboard thread used {:.3} ms CPU",
                crate::overhead::thread_cpu().as_secs_f64() * 1e3
            );
            return Ok(());
        }
        let next_frame = Instant::now() + FRAME_EVERY;
        while let Some(wait) = next_frame.checked_duration_since(Instant::now()) {
            if stop.load(Ordering::SeqCst) || !event::poll(wait)? {
                break;
            }
            match event::read()? {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    let ctrl_c = key.code == KeyCode::Char('c')
                        && key.modifiers.contains(KeyModifiers::CONTROL);
                    if ctrl_c || key.code == KeyCode::Char('q') {
                        interrupt();
                    } else {
                        view = on_key(view, key.code);
                    }
                }
                Event::Resize(..) => break,
                _ => {}
            }
        }
    }
}

/// Raw mode turns Ctrl-C into a key: send the signal the run already handles (first: stop
/// sending and drain; second: cancel; third: exit).
fn interrupt() {
    // SAFETY: kill(2) on our own pid with a valid signal number has no memory effects.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGINT);
    }
}

/// AIPerf's keys: 1 overview, 2-6 maximise a panel (again: restore), Esc restore, L logs.
fn on_key(view: View, key: KeyCode) -> View {
    let panel = match key {
        KeyCode::Char('1') | KeyCode::Esc => {
            return View {
                maximized: None,
                logs_hidden: key == KeyCode::Char('1') && view.logs_hidden,
            };
        }
        KeyCode::Char('l' | 'L') => {
            return View {
                logs_hidden: !view.logs_hidden,
                ..view
            };
        }
        KeyCode::Char('2') => Panel::Progress,
        KeyCode::Char('3') => Panel::Metrics,
        KeyCode::Char('4') => Panel::Client,
        KeyCode::Char('5') => Panel::Server,
        KeyCode::Char('6') => Panel::Logs,
        _ => return view,
    };
    View {
        maximized: (view.maximized != Some(panel)).then_some(panel),
        ..view
    }
}

/// One frame's figures.
fn gather(sources: &Sources, started: Instant, cpu: &mut CpuMeter, colour: bool) -> Screen {
    let (phase, phase_started_ns) = sources.board.phase();
    let now_ns = sources.clock.now_ns();
    Screen {
        title: sources.title.clone(),
        phase: Some(phase),
        elapsed_s: started.elapsed().as_secs_f64(),
        phase_elapsed_s: now_ns.saturating_sub(phase_started_ns) as f64 / 1e9,
        in_flight: (sources.in_flight)(),
        plan: sources.plan,
        live: sources.board.snapshot(),
        client: cpu.usage(),
        servers: (sources.servers)(),
        gpus: (sources.gpus)(),
        logs: ui::captured_log(200),
        colour,
    }
}

/// The client's CPU use and memory, read from `/proc` once a second (not every frame: those
/// reads were most of what a frame cost).
struct CpuMeter {
    last: Option<(Instant, u64)>,
    usage: ClientUsage,
}

impl CpuMeter {
    fn new() -> CpuMeter {
        CpuMeter {
            last: None,
            usage: ClientUsage::default(),
        }
    }

    fn usage(&mut self) -> ClientUsage {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|(at, _)| now.duration_since(at) < Duration::from_secs(1))
        {
            return self.usage;
        }
        let Some(process) = crate::overhead::process_cpu_ns() else {
            return self.usage;
        };
        let mock = crate::overhead::threads_cpu_ns(crate::overhead::MOCK_THREAD_NAME);
        let used = process.saturating_sub(mock.unwrap_or(0));
        if let Some((at, before)) = self.last {
            let wall = now.duration_since(at).as_nanos() as f64;
            self.usage.cpu_pct = Some(used.saturating_sub(before) as f64 / wall * 100.0);
        }
        self.usage.rss_bytes = rss_bytes();
        self.last = Some((now, used));
        self.usage
    }
}

/// Resident memory of the process, from `/proc/self/statm`.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_maximise_restore_and_toggle_the_log() {
        let v = on_key(View::default(), KeyCode::Char('3'));
        assert_eq!(v.maximized, Some(Panel::Metrics));
        assert_eq!(
            on_key(v, KeyCode::Char('3')).maximized,
            None,
            "again: restore"
        );
        assert_eq!(on_key(v, KeyCode::Char('6')).maximized, Some(Panel::Logs));
        assert_eq!(on_key(v, KeyCode::Esc), View::default());
        let hidden = on_key(View::default(), KeyCode::Char('L'));
        assert!(hidden.logs_hidden);
        assert!(
            on_key(hidden, KeyCode::Char('1')).logs_hidden,
            "1 keeps the choice"
        );
        assert!(
            !on_key(hidden, KeyCode::Esc).logs_hidden,
            "Esc restores all"
        );
        assert_eq!(on_key(hidden, KeyCode::Char('x')), hidden);
    }

    #[test]
    fn this_process_has_resident_memory() {
        assert!(rss_bytes().is_some_and(|b| b > 1_000_000));
    }
}
