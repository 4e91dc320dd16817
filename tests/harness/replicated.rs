//! Private store servers that fail over: a Redis primary and its replica, a
//! Redis server whose append-only file loses its last second, a PostgreSQL
//! primary and its asynchronous standby. Each runs on a free loopback port in
//! a fresh temporary directory, never the services' ones (`services`): a
//! failover scenario kills and promotes them, which the services shared by
//! every suite must never see. Each process is this harness's own child,
//! stopped by its pid, and killed when dropped so a failed test leaves no
//! server behind.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::unique;

/// How long a store gets to start, promote or load its files.
const START_WITHIN: Duration = Duration::from_secs(30);

/// A fresh directory under the system's temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let path = std::env::temp_dir().join(unique(prefix));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port nobody listens on now. Another process could take it
/// before the store binds it, which a test machine's few listeners make
/// unlikely enough.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("a bound listener has an address").port()
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn signal(child: &Child, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pids fit pid_t");
    // SAFETY: kill(2) on our own child's pid, which stays reserved until we reap it.
    unsafe { libc::kill(pid, sig) };
}

/// Sends `sig` and reaps the child, with SIGKILL if it is not gone within `grace`.
fn stop(child: &mut Child, sig: libc::c_int, grace: Duration) {
    signal(child, sig);
    let deadline = Instant::now() + grace;
    while matches!(child.try_wait(), Ok(None)) {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Redis reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<String>),
    Array(Vec<Resp>),
}

/// Sends one command to the Redis server at `addr` on a new connection and
/// reads its reply: the few control commands a scenario sends need no
/// client library.
pub fn redis_call(addr: SocketAddr, args: &[&str]) -> io::Result<Resp> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut command = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        command.extend(format!("${}\r\n{arg}\r\n", arg.len()).bytes());
    }
    stream.write_all(&command)?;
    read_resp(&mut BufReader::new(stream))
}

fn read_resp(reader: &mut impl BufRead) -> io::Result<Resp> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at_checked(1).ok_or_else(|| invalid("an empty reply".into()))?;
    let number = |text: &str| text.parse::<i64>().map_err(|e| invalid(format!("{text:?}: {e}")));
    Ok(match kind {
        "+" => Resp::Simple(rest.to_owned()),
        "-" => Resp::Error(rest.to_owned()),
        ":" => Resp::Integer(number(rest)?),
        "$" => match usize::try_from(number(rest)?) {
            Err(_) => Resp::Bulk(None),
            Ok(len) => {
                let mut body = vec![0; len + 2];
                reader.read_exact(&mut body)?;
                body.truncate(len);
                Resp::Bulk(Some(String::from_utf8_lossy(&body).into_owned()))
            }
        },
        "*" => {
            let len = usize::try_from(number(rest)?).unwrap_or(0);
            Resp::Array((0..len).map(|_| read_resp(reader)).collect::<io::Result<_>>()?)
        }
        _ => return Err(invalid(format!("not a RESP reply: {line:?}"))),
    })
}

/// A `redis-server` this harness started.
pub struct Redis {
    child: Child,
    addr: SocketAddr,
}

impl Redis {
    /// Starts `redis-server` on `port` with its files in `dir`, `config`
    /// added as `--name value` pairs, and waits until it has loaded its
    /// data and answers PING.
    pub fn start(dir: &Path, port: u16, config: &[(&str, &str)]) -> Redis {
        let log = dir.join(format!("redis-{port}.log"));
        let mut command = Command::new("redis-server");
        command
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(&log);
        for (name, value) in config {
            command.arg(format!("--{name}")).arg(value);
        }
        let child = command
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server does not start (is it installed?): {e}"));
        let mut redis = Redis { child, addr: loopback(port) };
        let deadline = Instant::now() + START_WITHIN;
        while redis_call(redis.addr, &["PING"]).ok() != Some(Resp::Simple("PONG".into())) {
            let exited = redis.child.try_wait().ok().flatten();
            // The log itself goes with its directory when the test unwinds.
            let text = || std::fs::read_to_string(&log).unwrap_or_default();
            assert!(exited.is_none(), "redis-server on port {port} exited ({exited:?}):\n{}", text());
            assert!(Instant::now() < deadline, "redis-server on port {port} not ready within {START_WITHIN:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Runs a command; an error reply or a lost connection fails the test.
    pub fn call(&self, args: &[&str]) -> Resp {
        match redis_call(self.addr, args) {
            Ok(Resp::Error(e)) => panic!("redis {} {args:?}: {e}", self.addr),
            Ok(reply) => reply,
            Err(e) => panic!("redis {} {args:?}: {e}", self.addr),
        }
    }

    /// A field of `INFO section`, such as `master_repl_offset`.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let Resp::Bulk(Some(text)) = self.call(&["INFO", section]) else { return None };
        text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(str::to_owned))
    }

    /// `info`, read as a number.
    pub fn info_number(&self, section: &str, field: &str) -> u64 {
        let value = self.info(section, field).unwrap_or_else(|| panic!("INFO {section} has no {field}"));
        value.parse().unwrap_or_else(|e| panic!("INFO {section} {field} {value:?}: {e}"))
    }

    /// SIGKILL: whatever Redis had not written to its files is gone.
    pub fn kill(mut self) {
        stop(&mut self.child, libc::SIGKILL, Duration::from_secs(5));
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        stop(&mut self.child, libc::SIGKILL, Duration::from_secs(5));
    }
}

/// The incremental file of a Redis 7 multi-part append-only file in `dir`:
/// the last one of type `i` the manifest names, where every write since
/// the last rewrite goes.
pub fn aof_incr_file(dir: &Path, appenddirname: &str) -> PathBuf {
    let aof = dir.join(appenddirname);
    let manifest = std::fs::read_dir(&aof)
        .unwrap_or_else(|e| panic!("{}: {e}", aof.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "manifest"))
        .unwrap_or_else(|| panic!("no AOF manifest in {}", aof.display()));
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let incr = text
        .lines()
        .rev()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let field = |name: &str| fields.iter().position(|f| *f == name).and_then(|i| fields.get(i + 1).copied());
            (field("type") == Some("i")).then(|| field("file")).flatten()
        })
        .unwrap_or_else(|| panic!("{} names no incremental file: {text}", manifest.display()));
    aof.join(incr)
}

/// The size of a file sampled every `every` on a thread, so a scenario can
/// cut the file back to what it held a moment ago: what a power cut takes
/// from a file whose last writes were still in the page cache.
pub struct FileSizes {
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileSizes {
    pub fn sample(path: PathBuf, every: Duration) -> FileSizes {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                if let Ok(meta) = std::fs::metadata(&path) {
                    s.lock().unwrap_or_else(|e| e.into_inner()).push((Instant::now(), meta.len()));
                }
                std::thread::sleep(every);
            }
        });
        FileSizes { samples, stop, thread: Some(thread) }
    }

    /// The last sample taken at or before `at`: when, and the size.
    pub fn at(&self, at: Instant) -> Option<(Instant, u64)> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples.iter().rev().find(|(t, _)| *t <= at).copied()
    }
}

impl Drop for FileSizes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The `postgres` user's uid and gid when this process is root: PostgreSQL
/// refuses to run as root, so its programs and files are that user's.
fn postgres_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    // SAFETY: a NUL-terminated name; the entry is read at once, before any other getpw* call.
    let entry = unsafe { libc::getpwnam(c"postgres".as_ptr()) };
    assert!(!entry.is_null(), "running as root, and there is no postgres user to run PostgreSQL as");
    // SAFETY: getpwnam returned a valid entry.
    Some(unsafe { ((*entry).pw_uid, (*entry).pw_gid) })
}

/// A PostgreSQL program, from the directory `initdb` on the PATH lives in
/// (the server binaries are seldom all on the PATH), else the newest
/// version's directory of the Debian layout `scripts/services.sh` uses.
fn pg_program(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).map(|p| p.join("initdb")).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let debian = || {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .map(|d| d.filter_map(Result::ok).map(|e| e.path().join("bin")).collect())
            .unwrap_or_default();
        dirs.sort_by_key(|d| {
            let version = d.parent().and_then(Path::file_name).and_then(|v| v.to_str()).and_then(|v| v.parse().ok());
            version.unwrap_or(0u32)
        });
        dirs.pop()
    };
    let program = on_path.or_else(debian).map(|dir| dir.join(name)).filter(|p| p.is_file());
    program.unwrap_or_else(|| panic!("PostgreSQL's {name} not found: install the PostgreSQL server"))
}

/// `program` as the `postgres` user when this process is root.
fn pg_command(program: &str, cwd: &Path) -> Command {
    let mut command = Command::new(pg_program(program));
    if let Some((uid, gid)) = postgres_user() {
        command.uid(uid).gid(gid);
    }
    command.current_dir(cwd).stdin(Stdio::null());
    command
}

/// A directory PostgreSQL can own: the `postgres` user's when this process is root.
fn give_to_postgres(dir: &Path) {
    if let Some((uid, gid)) = postgres_user() {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown {}: {e}", dir.display()));
    }
}

fn run(mut command: Command, what: &str, log: &Path) {
    let out = File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let err = out.try_clone().expect("a log file handle");
    let status = command.stdout(out).stderr(err).status().unwrap_or_else(|e| panic!("{what} does not start: {e}"));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    assert!(status.success(), "{what}: {status}\n{text}");
}

/// The role and database `repute serve` connects as, as `scripts/services.sh` creates them.
pub const PG_USER: &str = "repute";

/// A `postgres` server (the postmaster itself, so its pid is the server's)
/// this harness started.
pub struct Postgres {
    child: Child,
    addr: SocketAddr,
}

impl Postgres {
    /// A new primary in `dir`, with the `repute` role and database, and a
    /// trust `pg_hba` for loopback (replication included, as initdb writes it).
    pub fn primary(dir: &Path) -> Postgres {
        give_to_postgres(dir);
        let mut initdb = pg_command("initdb", dir);
        // No fsync of the fresh cluster: a test's throwaway data, and seconds saved per run.
        initdb.arg("-D").arg(dir.join("data")).args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
        run(initdb, "initdb", &dir.join("initdb.log"));
        let primary = Postgres::start(dir, free_port());
        let mut client = primary.connect("postgres");
        // Two statements: CREATE DATABASE refuses to run in a batch's implicit transaction.
        for statement in
            [format!("CREATE ROLE {PG_USER} LOGIN SUPERUSER"), format!("CREATE DATABASE {PG_USER} OWNER {PG_USER}")]
        {
            client.batch_execute(&statement).unwrap_or_else(|e| panic!("{statement}: {e:?}"));
        }
        primary
    }

    /// A streaming standby of the primary reached at `upstream`, in `dir`:
    /// `pg_basebackup -R` through `upstream`, so the standby's
    /// `primary_conninfo` names it too. Asynchronous: the primary names no
    /// `synchronous_standby_names`, so it acknowledges commits the standby
    /// may never receive.
    pub fn standby(upstream: SocketAddr, dir: &Path) -> Postgres {
        give_to_postgres(dir);
        let mut backup = pg_command("pg_basebackup", dir);
        backup
            .args(["-h", &upstream.ip().to_string(), "-p", &upstream.port().to_string(), "-U", "postgres"])
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]);
        run(backup, "pg_basebackup", &dir.join("basebackup.log"));
        Postgres::start(dir, free_port())
    }

    /// Starts the server on `dir/data` and waits until it accepts connections.
    fn start(dir: &Path, port: u16) -> Postgres {
        let log = dir.join(format!("postgres-{port}.log"));
        let out = File::create(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let err = out.try_clone().expect("a log file handle");
        let mut command = pg_command("postgres", dir);
        command.arg("-D").arg(dir.join("data")).args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"]);
        command.arg("-c").arg(format!("unix_socket_directories={}", dir.display()));
        // Room for three servers' pools; replication as the defaults already allow it, named.
        command.args(["-c", "max_connections=200", "-c", "wal_level=replica", "-c", "max_wal_senders=4"]);
        // A standby whose link died retries it after this long, and only then
        // notices a promotion: the default 5 s would leave a promoted
        // standby in recovery for up to that long.
        command.args(["-c", "wal_retrieve_retry_interval=100ms"]);
        let child = command.stdout(out).stderr(err).spawn().unwrap_or_else(|e| panic!("postgres does not start: {e}"));
        let mut server = Postgres { child, addr: loopback(port) };
        let deadline = Instant::now() + START_WITHIN;
        while let Err(e) = postgres::Client::connect(&server.url("postgres", "postgres"), postgres::NoTls) {
            let exited = server.child.try_wait().ok().flatten();
            let text = || std::fs::read_to_string(&log).unwrap_or_default();
            assert!(exited.is_none(), "postgres on port {port} exited ({exited:?}):\n{}", text());
            assert!(Instant::now() < deadline, "postgres on port {port} not ready within {START_WITHIN:?}: {e:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn url(&self, user: &str, db: &str) -> String {
        format!("postgres://{user}@{}/{db}", self.addr)
    }

    /// A superuser connection to database `db`.
    pub fn connect(&self, db: &str) -> postgres::Client {
        let url = self.url("postgres", db);
        postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| panic!("{url}: {e:?}"))
    }

    /// Immediate shutdown (SIGQUIT, what `pg_ctl stop -m immediate` sends):
    /// every process exits at once, with no checkpoint and no last WAL sent
    /// to the standby, as in a crash.
    pub fn stop_immediately(mut self) {
        stop(&mut self.child, libc::SIGQUIT, Duration::from_secs(10));
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        stop(&mut self.child, libc::SIGQUIT, Duration::from_secs(10));
    }
}

/// A WAL position (`X/Y`) as a byte offset.
pub fn lsn(text: &str) -> u64 {
    let (high, low) = text.split_once('/').unwrap_or_else(|| panic!("not an LSN: {text}"));
    let part = |p: &str| u64::from_str_radix(p, 16).unwrap_or_else(|e| panic!("not an LSN: {text}: {e}"));
    (part(high) << 32) | part(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_replies_are_parsed() {
        let parse = |text: &str| read_resp(&mut BufReader::new(text.as_bytes())).unwrap();
        assert_eq!(parse("+OK\r\n"), Resp::Simple("OK".into()));
        assert_eq!(parse("-ERR no\r\n"), Resp::Error("ERR no".into()));
        assert_eq!(parse(":42\r\n"), Resp::Integer(42));
        assert_eq!(parse("$5\r\na\r\nbc\r\n"), Resp::Bulk(Some("a\r\nbc".into())));
        assert_eq!(parse("$-1\r\n"), Resp::Bulk(None));
        assert_eq!(parse("*2\r\n:1\r\n$1\r\nx\r\n"), Resp::Array(vec![Resp::Integer(1), Resp::Bulk(Some("x".into()))]));
    }

    #[test]
    fn lsns_are_byte_offsets() {
        assert_eq!(lsn("0/3000148"), 0x300_0148);
        assert_eq!(lsn("1/0"), 1 << 32);
    }
}
