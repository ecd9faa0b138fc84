//! Runs a model's Python program on one test case in a `python3` subprocess with limits.
//!
//! What the sandbox does, per run:
//! - a fresh temporary working directory (HOME and TMPDIR too), removed afterwards; the
//!   program, its input, its stdout and its stderr are files in it;
//! - an environment of a few fixed variables (PATH, locale, Python's I/O settings): none of
//!   aiperf's own variables (API keys, HF_TOKEN) reach the program;
//! - its own session and process group, killed as a whole (SIGKILL) when the wall-clock
//!   limit passes and again when the program ends (stray children of the group go too);
//! - resource limits set before `exec`: RLIMIT_AS (memory), RLIMIT_CPU (the time limit plus
//!   one second), RLIMIT_FSIZE (no file, stdout included, grows past the output limit),
//!   RLIMIT_CORE 0, and RLIMIT_NPROC (a few tasks more than the user runs now);
//! - on Linux with Landlock (5.13+), a Landlock domain: files and directories may be
//!   created, written, truncated, renamed or removed only inside the working directory; from
//!   ABI 4 no TCP connection or bind; from ABI 6 no signal to processes outside the
//!   sandbox.
//!
//! What it does not do: it is not a container. The program runs as the same user and can
//! read every file that user can (the dataset cache included); without Landlock (an older
//! kernel or a seccomp profile that blocks it) it can also write and delete that user's
//! files. RLIMIT_NPROC does not bind root, so as root a program can fork, and a child that
//! leaves the process group (setsid) outlives the kill. UDP and Unix sockets are not
//! filtered. It guards against the accidents of generated code (endless loops, runaway
//! memory, stray files), not against code written to escape it.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// The limits of one run.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The interpreter (its real path, found once with the caller's PATH).
    pub python: String,
    /// Wall-clock time of one test case (lighteval's 6 s).
    pub timeout: Duration,
    /// RLIMIT_AS.
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE: the most the program may write to stdout or any file.
    pub output_bytes: u64,
}

/// How the program is run.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// As a script: the case on stdin, the answer on stdout.
    Stdio,
    /// Call-based: `fn_name` (of `Solution` when the code defines that class) called with
    /// the case's JSON arguments (one per line, on stdin); its return value comes back as
    /// JSON on stdout, the program's own prints going to stderr.
    Call(&'a str),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// The harness's exit code: 0 ran, 1 raised an exception, 3 no such function, 4 the
    /// return value is not JSON.
    Exited(i32),
    /// Killed by a signal other than the limits' (e.g. SIGSEGV).
    Signaled(i32),
    /// Past the wall-clock or CPU limit.
    TimedOut,
    /// Wrote past RLIMIT_FSIZE (SIGXFSZ).
    OutputTooLarge,
}

#[derive(Debug)]
pub struct Outcome {
    pub status: Status,
    pub stdout: Vec<u8>,
    /// The end of stderr (at most 2000 bytes), for explanations.
    pub stderr_tail: String,
}

/// The harness: reads `solution.py` from the working directory and runs it as `Mode`
/// says. The argument after `-c` is the mode (`stdio` or `call`), then the function name.
const HARNESS: &str = r#"
import builtins, io, json, os, sys, traceback
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(50000)
mode = sys.argv[1]
with open("solution.py", encoding="utf-8") as f:
    source = f.read()
with open("prelude.py", encoding="utf-8") as f:
    prelude = f.read()
scope = {"__builtins__": builtins, "__name__": "__main__" if mode == "stdio" else "solution"}
if mode == "stdio":
    status = 0
    try:
        exec(compile(prelude + source, "solution.py", "exec"), scope)
    except SystemExit:
        pass
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
    except BaseException:
        status = 1
    os._exit(status)
args = [json.loads(line) for line in sys.stdin.read().split("\n")]
sys.stdin = io.StringIO("")
answer_fd = os.dup(1)
os.dup2(2, 1)
try:
    exec(compile(prelude + source, "solution.py", "exec"), scope)
    target = scope["Solution"]() if "class Solution" in source else None
    method = scope.get(sys.argv[2]) if target is None else getattr(target, sys.argv[2], None)
    if method is None:
        os._exit(3)
    result = method(*args)
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(1)
if isinstance(result, tuple):
    result = list(result)
try:
    text = json.dumps(result, allow_nan=False)
except (TypeError, ValueError):
    os._exit(4)
os.write(answer_fd, text.encode("utf-8"))
os._exit(0)
"#;

/// Modules whose names lighteval's runner puts in scope before the program (star imports,
/// then the modules themselves), so a program may use `sys`, `deque` or `gcd` unimported.
const STAR_IMPORTS: &[&str] = &[
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
    "builtins",
    "typing",
];

/// The lines run before the program.
fn prelude() -> String {
    let mut out = String::new();
    for m in STAR_IMPORTS {
        out.push_str(&format!("from {m} import *\n"));
    }
    for m in STAR_IMPORTS
        .iter()
        .filter(|m| !matches!(**m, "builtins" | "typing"))
    {
        out.push_str(&format!("import {m}\n"));
    }
    out.push_str("sys.setrecursionlimit(50000)\n\n");
    out
}

/// The interpreter's real path (a pyenv shim needs the caller's environment, which the
/// sandbox does not pass on), or why there is none.
pub fn find_python(name: &str) -> Result<String, String> {
    let out = Command::new(name)
        .args(["-c", "import sys; print(sys.executable)"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {name}: {e}"))?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        return Err(format!(
            "{name} -c 'import sys; print(sys.executable)' failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(path)
}

/// Runs `code` on `input`.
pub fn run(limits: &Limits, code: &str, mode: Mode, input: &str) -> std::io::Result<Outcome> {
    let dir = tempfile::Builder::new().prefix("aiperf-lcb-").tempdir()?;
    let work = dir.path();
    std::fs::write(work.join("solution.py"), code)?;
    std::fs::write(work.join("prelude.py"), prelude())?;
    std::fs::write(work.join("input.txt"), input)?;
    let stdin = File::open(work.join("input.txt"))?;
    let stdout = File::create(work.join("stdout.txt"))?;
    let stderr = File::create(work.join("stderr.txt"))?;
    let mut cmd = Command::new(&limits.python);
    cmd.arg("-c").arg(HARNESS);
    match mode {
        Mode::Stdio => cmd.arg("stdio"),
        Mode::Call(name) => cmd.arg("call").arg(name),
    };
    cmd.current_dir(work)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", work)
        .env("TMPDIR", work)
        .env("LANG", "C.UTF-8")
        .env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("OMP_NUM_THREADS", "1")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    let cpu = limits.timeout.as_secs() + 1 + u64::from(limits.timeout.subsec_nanos() > 0);
    let rlimits = [
        (libc::RLIMIT_AS, limits.memory_bytes),
        (libc::RLIMIT_CPU, cpu),
        (libc::RLIMIT_FSIZE, limits.output_bytes),
        (libc::RLIMIT_CORE, 0),
        (libc::RLIMIT_NPROC, user_tasks() + 32),
    ];
    let landlock = landlock::Rules::new(work)?;
    // SAFETY: between fork and exec the closure only makes system calls (setsid, setrlimit,
    // prctl, open, landlock) on data prepared before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for (resource, value) in rlimits {
                let limit = libc::rlimit {
                    rlim_cur: value as libc::rlim_t,
                    rlim_max: value as libc::rlim_t,
                };
                if libc::setrlimit(resource, &limit) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            landlock.restrict_self()
        });
    }
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let group = child.id() as libc::pid_t;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() >= limits.timeout {
            timed_out = true;
            kill_group(group);
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Whatever the program left running in its group goes with it.
    kill_group(group);
    let status = match status.signal() {
        _ if timed_out => Status::TimedOut,
        Some(libc::SIGXCPU) => Status::TimedOut,
        Some(libc::SIGXFSZ) => Status::OutputTooLarge,
        Some(sig) => Status::Signaled(sig),
        None => Status::Exited(status.code().unwrap_or(-1)),
    };
    let mut stdout = Vec::new();
    File::open(work.join("stdout.txt"))?
        .take(limits.output_bytes)
        .read_to_end(&mut stdout)?;
    Ok(Outcome {
        status,
        stdout,
        stderr_tail: tail(&work.join("stderr.txt"), 2000),
    })
}

fn kill_group(group: libc::pid_t) {
    // SAFETY: a plain system call; ESRCH (the group is gone) is fine.
    unsafe {
        libc::killpg(group, libc::SIGKILL);
    }
}

/// The last `max` bytes of a file, as text.
fn tail(path: &Path, max: u64) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut bytes = Vec::new();
    let _ = f.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// The tasks (processes and threads) the user runs now, which RLIMIT_NPROC counts.
fn user_tasks() -> u64 {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() }.to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 4096;
    };
    let mut tasks = 0;
    for entry in entries.flatten() {
        if !entry.file_name().as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
        };
        if field("Uid:") == Some(uid.as_str()) {
            tasks += field("Threads:").and_then(|t| t.parse().ok()).unwrap_or(1);
        }
    }
    tasks
}

/// Whether this kernel enforces Landlock (its ABI version, 0 when not).
pub fn landlock_abi() -> u32 {
    *landlock::ABI
}

#[cfg(target_os = "linux")]
mod landlock {
    use super::*;

    const CREATE_RULESET_VERSION: u32 = 1;
    const RULE_PATH_BENEATH: libc::c_int = 1;
    /// Writing to files and creating, removing or renaming entries (ABI 1); linking or
    /// renaming across directories (REFER, ABI 2); truncating (ABI 3). Reading and
    /// executing are not handled, so they stay allowed everywhere.
    const FS_WRITE_V1: u64 = (1 << 1) | (0b1_1111_1111 << 4);
    const FS_REFER: u64 = 1 << 13;
    const FS_TRUNCATE: u64 = 1 << 14;
    /// TCP bind and connect (ABI 4), with no rule: none allowed.
    const NET_TCP: u64 = 0b11;
    /// Signals to processes outside the domain (ABI 6).
    const SCOPE_SIGNAL: u64 = 1 << 1;

    pub static ABI: LazyLock<u32> = LazyLock::new(|| {
        // SAFETY: the version query takes no pointer.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(v).unwrap_or(0)
    });

    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
        handled_access_net: u64,
        scoped: u64,
    }

    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }

    /// A Landlock domain for one run: writes only under `dir`.
    pub struct Rules {
        abi: u32,
        dir: CString,
    }

    impl Rules {
        pub fn new(dir: &Path) -> std::io::Result<Rules> {
            Ok(Rules {
                abi: *ABI,
                dir: CString::new(dir.as_os_str().as_bytes())?,
            })
        }

        /// Enters the domain (in the child, before exec); nothing when Landlock is absent.
        pub fn restrict_self(&self) -> std::io::Result<()> {
            if self.abi == 0 {
                return Ok(());
            }
            let err = std::io::Error::last_os_error;
            let mut fs = FS_WRITE_V1;
            if self.abi >= 2 {
                fs |= FS_REFER;
            }
            if self.abi >= 3 {
                fs |= FS_TRUNCATE;
            }
            let attr = RulesetAttr {
                handled_access_fs: fs,
                handled_access_net: if self.abi >= 4 { NET_TCP } else { 0 },
                scoped: if self.abi >= 6 { SCOPE_SIGNAL } else { 0 },
            };
            let size = match self.abi {
                1..=3 => 8,
                4 | 5 => 16,
                _ => 24,
            };
            // SAFETY: system calls on a struct that outlives them and fds this code owns.
            unsafe {
                let ruleset = libc::syscall(
                    libc::SYS_landlock_create_ruleset,
                    &attr as *const RulesetAttr,
                    size as libc::size_t,
                    0u32,
                );
                if ruleset < 0 {
                    return Err(err());
                }
                let ruleset = ruleset as libc::c_int;
                let dir = libc::open(self.dir.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if dir < 0 {
                    return Err(err());
                }
                let rule = PathBeneath {
                    allowed_access: fs,
                    parent_fd: dir,
                };
                if libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset,
                    RULE_PATH_BENEATH,
                    &rule as *const PathBeneath,
                    0u32,
                ) < 0
                {
                    return Err(err());
                }
                libc::close(dir);
                if libc::prctl(
                    libc::PR_SET_NO_NEW_PRIVS,
                    1 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                ) < 0
                {
                    return Err(err());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) < 0 {
                    return Err(err());
                }
                libc::close(ruleset);
            }
            Ok(())
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod landlock {
    use super::*;

    pub static ABI: LazyLock<u32> = LazyLock::new(|| 0);

    pub struct Rules;

    impl Rules {
        pub fn new(_dir: &Path) -> std::io::Result<Rules> {
            Ok(Rules)
        }

        pub fn restrict_self(&self) -> std::io::Result<()> {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            python: find_python("python3").expect("python3 for the sandbox tests"),
            timeout: Duration::from_secs(5),
            memory_bytes: 512 << 20,
            output_bytes: 1 << 20,
        }
    }

    #[test]
    fn stdio_and_call_runs() {
        let l = limits();
        // The prelude's names need no import.
        let o = run(
            &l,
            "n = int(input())\nprint(n * 2, sqrt(16))",
            Mode::Stdio,
            "21\n",
        )
        .unwrap();
        assert_eq!(o.status, Status::Exited(0), "{}", o.stderr_tail);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "42 4.0\n");
        // exit() ends the program normally; an exception is a runtime error.
        let o = run(&l, "print(1)\nexit(3)", Mode::Stdio, "").unwrap();
        assert_eq!((o.status, o.stdout), (Status::Exited(0), b"1\n".to_vec()));
        let o = run(&l, "raise ValueError('boom')", Mode::Stdio, "").unwrap();
        assert_eq!(o.status, Status::Exited(1));
        assert!(o.stderr_tail.contains("ValueError: boom"));
        let code = "class Solution:\n    def add(self, a: int, b: List[int]) -> Tuple[int, int]:\n        print('noise')\n        return a, sum(b)\n";
        let o = run(&l, code, Mode::Call("add"), "1\n[2, 3]").unwrap();
        assert_eq!(o.status, Status::Exited(0), "{}", o.stderr_tail);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "[1, 5]");
        assert_eq!(
            run(&l, code, Mode::Call("sub"), "1\n[2]").unwrap().status,
            Status::Exited(3)
        );
    }

    #[test]
    fn limits_hold() {
        let mut l = limits();
        l.timeout = Duration::from_millis(800);
        let started = Instant::now();
        let o = run(&l, "while True: pass", Mode::Stdio, "").unwrap();
        assert_eq!(o.status, Status::TimedOut);
        // A sleeping program uses no CPU: the wall clock ends it.
        let o = run(&l, "import time\ntime.sleep(60)", Mode::Stdio, "").unwrap();
        assert_eq!(o.status, Status::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10));
        // 1 GiB is past the 512 MiB of address space.
        let o = run(
            &l,
            "b = bytearray(1 << 30)\nprint('allocated')",
            Mode::Stdio,
            "",
        )
        .unwrap();
        assert_eq!(o.status, Status::Exited(1));
        assert!(o.stderr_tail.contains("MemoryError"), "{}", o.stderr_tail);
        assert!(o.stdout.is_empty());
        // Past RLIMIT_FSIZE Python's write fails (it ignores SIGXFSZ): a runtime error.
        let o = run(&l, "print('x' * (2 << 20))", Mode::Stdio, "").unwrap();
        assert_eq!(o.status, Status::Exited(1));
        assert!(
            o.stderr_tail.contains("File too large"),
            "{}",
            o.stderr_tail
        );
        assert!(o.stdout.len() <= 1 << 20);
    }

    #[test]
    fn no_secrets_in_the_environment() {
        // SAFETY: the test's own variable, read only by the child below.
        unsafe { std::env::set_var("AIPERF_SANDBOX_TEST_SECRET", "s3cret") };
        let o = run(
            &limits(),
            "import os\nprint(os.environ.get('AIPERF_SANDBOX_TEST_SECRET'), os.getcwd() == os.environ['HOME'])",
            Mode::Stdio,
            "",
        )
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "None True\n");
    }

    #[test]
    fn writes_stay_in_the_working_directory() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim.txt");
        std::fs::write(&victim, "keep me").unwrap();
        let code = format!(
            r#"
import os
results = []
def attempt(name, f):
    try:
        f()
        results.append(name + "=ok")
    except OSError:
        results.append(name + "=denied")
attempt("here", lambda: open("scratch.txt", "w").write("fine"))
attempt("big", lambda: open("big.bin", "wb").write(b"x" * (2 << 20)))
attempt("truncate", lambda: open({victim:?}, "w").close())
attempt("create", lambda: open({new:?}, "w").close())
attempt("remove", lambda: os.remove({victim:?}))
print(" ".join(results))
"#,
            victim = victim.display().to_string(),
            new = outside.path().join("new.txt").display().to_string(),
        );
        // Python raises OSError (EFBIG) past RLIMIT_FSIZE: SIGXFSZ is ignored by Python.
        let o = run(&limits(), &code, Mode::Stdio, "").unwrap();
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            out.starts_with("here=ok big=denied"),
            "{out} {}",
            o.stderr_tail
        );
        if landlock_abi() >= 3 {
            assert_eq!(
                out.trim(),
                "here=ok big=denied truncate=denied create=denied remove=denied"
            );
        }
        // Whatever the kernel, the file outside is as it was when Landlock is enforced;
        // without it only RLIMIT_FSIZE holds (see the module's note).
        if landlock_abi() >= 1 {
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
            assert!(!outside.path().join("new.txt").exists());
        }
    }
}
