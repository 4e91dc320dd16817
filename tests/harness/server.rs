//! One `repute serve` process (or the Python process standing in for one),
//! and the signals a fault test sends it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server; dropping it kills the process, so a failed test leaves
/// no server behind.
pub struct Server {
    child: Child,
    base: String,
}

/// `target/release/repute`, beside the test binary's `deps/` folder. The
/// binary is not a dependency of this crate, so cargo does not build it for
/// `-p repute-tests` alone; `cargo test --workspace --release` does.
pub fn repute_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let bin =
        exe.parent().and_then(|deps| deps.parent()).expect("the test binary lives in target/*/deps").join("repute");
    assert!(
        bin.is_file(),
        "{} is missing: build it with `cargo build --release -p repute-cli` (or run `cargo test --workspace --release`)",
        bin.display()
    );
    bin
}

impl Server {
    /// Starts `repute serve` on a free loopback port with `args` and waits
    /// until it answers `/readyz`.
    pub fn start(args: &[String]) -> Server {
        let mut command = Command::new(repute_binary());
        command.arg("serve").args(["--listen", "127.0.0.1:0", "--log", "warn"]).args(args);
        Server::spawn(command, &format!("repute serve {args:?}"))
    }

    /// Starts `tests/harness/python_pool.py`: one tenant's pool on the SQLite
    /// file `db`, held by a Python process through the `repute` binding and
    /// answering the routes the workload and the checker use. The Python is
    /// `REPUTE_TEST_PYTHON`, one with the binding installed (`./test.sh`
    /// sets it to the venv `bindings-python/test.sh` builds).
    pub fn python_pool(db: &std::path::Path, tenant: &str, lease_ttl: Duration) -> Server {
        let python = std::env::var_os("REPUTE_TEST_PYTHON").unwrap_or_else(|| {
            panic!("REPUTE_TEST_PYTHON is not set: name a Python with the repute binding installed (./test.sh does)")
        });
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/harness/python_pool.py");
        let mut command = Command::new(python);
        command.arg(script).arg(db).arg(tenant).arg(lease_ttl.as_secs_f64().to_string());
        Server::spawn(command, "python_pool.py")
    }

    /// Spawns a process that prints `listening on ADDR` first, then waits
    /// until it answers `/readyz`.
    fn spawn(mut command: Command, what: &str) -> Server {
        let mut child = command
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
        let mut lines = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut first = String::new();
        lines.read_line(&mut first).unwrap_or_else(|e| panic!("{what} prints no address: {e}"));
        let Some(addr) = first.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            let status = child.wait();
            panic!("{what}: first line {first:?}, then {status:?} (its stderr is above)");
        };
        let base = format!("http://{addr}");
        // Keeps the pipe open: a server that writes to a closed stdout fails.
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
        let server = Server { child, base };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(1)).build();
        while agent.get(&format!("{}/readyz", self.base)).call().is_err() {
            assert!(Instant::now() < deadline, "{} not ready after 30 s", self.base);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `http://ADDR`, the address the server printed.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing and renews
    /// nothing, like a long GC pause or a frozen VM.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT after `pause`: the process resumes believing whatever it
    /// believed before, which is the dangerous part.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGKILL: no shutdown, no final checkpoint.
    pub fn kill(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    fn signal(&self, sig: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pids fit pid_t");
        // SAFETY: kill(2) on our own child's pid, which stays reserved until we reap it.
        let rc = unsafe { libc::kill(pid, sig) };
        assert_eq!(rc, 0, "kill({pid}, {sig}): {}", std::io::Error::last_os_error());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
