//! A TCP proxy in front of a store (PostgreSQL, Redis or etcd), one per
//! server, so that one server can lose the store while the others keep it:
//! the fault a network partition or a dead connection pool causes, which
//! restarting the store cannot show. In front of a replica's link to its
//! primary it holds the link, so the replica falls behind by what the
//! primary acknowledged meanwhile; in front of a managed endpoint it moves
//! every client to a promoted replica.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the pumps that wait for a `release`, or to learn that their
    /// connection was dropped while they held its bytes.
    changed: Condvar,
}

struct State {
    upstream: SocketAddr,
    /// Counts `retarget`s: a connection made to the upstream of before one must not slip through.
    retargets: u64,
    cut: bool,
    held: bool,
    closed: bool,
    next_id: u64,
    /// Both ends of every forwarded connection, so a cut can end them.
    live: HashMap<u64, (TcpStream, TcpStream)>,
    /// Connections accepted during a cut: held open and never answered, so the
    /// client waits as it would behind a partition instead of failing fast.
    blackholed: Vec<TcpStream>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the proxy binds a loopback port");
        let addr = listener.local_addr().expect("a bound listener has an address");
        let state = State {
            upstream,
            retargets: 0,
            cut: false,
            held: false,
            closed: false,
            next_id: 0,
            live: HashMap::new(),
            blackholed: Vec::new(),
        };
        let shared = Arc::new(Shared { state: Mutex::new(state), changed: Condvar::new() });
        let s = shared.clone();
        std::thread::spawn(move || accept_loop(&listener, &s));
        Proxy { addr, shared }
    }

    /// Where clients connect instead of the upstream.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every current connection and blackholes new ones until `restore`.
    pub fn cut(&self) {
        let mut state = self.shared.lock();
        state.cut = true;
        state.drop_live();
        self.shared.changed.notify_all();
    }

    /// Forwards again; the blackholed connections are closed so their clients
    /// notice and reconnect.
    pub fn restore(&self) {
        let mut state = self.shared.lock();
        state.cut = false;
        state.blackholed.clear();
    }

    /// Stops forwarding bytes, both ways, on every connection (new ones
    /// too) without closing any: both ends wait as behind a stalled link,
    /// and what the proxy read meanwhile stays with it. `release` forwards
    /// it; dropping the connection first (`cut`, `retarget`) loses it, as
    /// a link that dies loses what was in flight.
    pub fn hold(&self) {
        self.shared.lock().held = true;
    }

    /// Forwards again after `hold`, starting with what was held.
    pub fn release(&self) {
        self.shared.lock().held = false;
        self.shared.changed.notify_all();
    }

    /// Drops every current connection and forwards new ones to `upstream`:
    /// a managed endpoint moved to a promoted replica, which every client
    /// reaches only by reconnecting.
    pub fn retarget(&self, upstream: SocketAddr) {
        let mut state = self.shared.lock();
        state.upstream = upstream;
        state.retargets += 1;
        state.drop_live();
        self.shared.changed.notify_all();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.shared.lock().closed = true;
        // Wakes the accept loop so it sees `closed` and lets the port go.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits while the proxy holds; `false` once connection `id` was
    /// dropped, so its pump discards what it read instead of forwarding it.
    fn may_forward(&self, id: u64) -> bool {
        let mut state = self.lock();
        loop {
            if !state.live.contains_key(&id) {
                return false;
            }
            if !state.held {
                return true;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl State {
    fn drop_live(&mut self) {
        for (_, (a, b)) in self.live.drain() {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let (upstream, retargets) = {
            let mut state = shared.lock();
            if state.closed {
                return;
            }
            if state.cut {
                state.blackholed.push(client);
                continue;
            }
            (state.upstream, state.retargets)
        };
        let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else { continue };
        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { continue };
        let mut state = shared.lock();
        if state.cut {
            // Cut while connecting upstream: this connection must not slip through.
            state.blackholed.push(client);
            continue;
        }
        if state.retargets != retargets {
            // Retargeted while connecting: the client reconnects to the new upstream.
            continue;
        }
        let id = state.next_id;
        state.next_id += 1;
        state.live.insert(id, (c2, s2));
        drop(state);
        let (c3, s3) = (client.try_clone(), server.try_clone());
        if let (Ok(c3), Ok(s3)) = (c3, s3) {
            spawn_pump(shared.clone(), id, client, s3);
            spawn_pump(shared.clone(), id, server, c3);
        } else {
            end(shared, id);
        }
    }
}

/// Copies one direction until either side closes, then ends both
/// directions. Each chunk read waits out a hold before it is written, and
/// is discarded if the connection was dropped meanwhile.
fn spawn_pump(shared: Arc<Shared>, id: u64, mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if !shared.may_forward(id) || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        end(&shared, id);
    });
}

fn end(shared: &Shared, id: u64) {
    if let Some((a, b)) = shared.lock().live.remove(&id) {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::mpsc;

    /// An upstream that echoes every byte back.
    fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let mut w = s;
                    let _ = io::copy(&mut r, &mut w);
                });
            }
        });
        addr
    }

    fn round_trip(s: &mut TcpStream) -> io::Result<[u8; 4]> {
        s.set_read_timeout(Some(Duration::from_millis(300)))?;
        s.write_all(b"ping")?;
        let mut buf = [0; 4];
        s.read_exact(&mut buf)?;
        Ok(buf)
    }

    #[test]
    fn cut_drops_and_blackholes_until_restored() {
        let proxy = Proxy::start(echo());
        let mut before = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(&round_trip(&mut before).unwrap(), b"ping");

        proxy.cut();
        assert!(round_trip(&mut before).is_err(), "a connection open at the cut is dropped");
        let mut during = TcpStream::connect(proxy.addr()).unwrap();
        let e = round_trip(&mut during).unwrap_err();
        assert!(
            matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut),
            "blackholed, not refused: {e}"
        );

        proxy.restore();
        let mut buf = [0; 1];
        assert_eq!(during.read(&mut buf).unwrap_or(0), 0, "a blackholed connection is closed on restore");
        let mut after = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(&round_trip(&mut after).unwrap(), b"ping");
    }

    /// An upstream that answers every read with `reply`.
    fn answering(reply: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buf = [0; 64];
                    while matches!(s.read(&mut buf), Ok(n) if n > 0) {
                        if s.write_all(reply).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    /// An upstream that sends every byte it receives down the channel.
    fn recording() -> (SocketAddr, mpsc::Receiver<u8>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut buf = [0; 64];
                    let mut s = s;
                    while let Ok(n @ 1..) = s.read(&mut buf) {
                        for &b in &buf[..n] {
                            let _ = tx.send(b);
                        }
                    }
                });
            }
        });
        (addr, rx)
    }

    fn timed_out(e: &io::Error) -> bool {
        matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
    }

    #[test]
    fn hold_stalls_live_and_new_connections_until_released() {
        let proxy = Proxy::start(echo());
        let mut before = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(&round_trip(&mut before).unwrap(), b"ping");

        proxy.hold();
        let e = round_trip(&mut before).unwrap_err();
        assert!(timed_out(&e), "held, not closed: {e}");
        let mut during = TcpStream::connect(proxy.addr()).unwrap();
        let e = round_trip(&mut during).unwrap_err();
        assert!(timed_out(&e), "a new connection is held too: {e}");

        proxy.release();
        let mut buf = [0; 4];
        before.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping", "what was held is forwarded on release");
        during.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        assert_eq!(&round_trip(&mut before).unwrap(), b"ping");
    }

    #[test]
    fn a_held_connection_that_is_dropped_loses_what_was_held() {
        let (upstream, received) = recording();
        let proxy = Proxy::start(upstream);
        let mut link = TcpStream::connect(proxy.addr()).unwrap();
        link.write_all(b"kept").unwrap();
        let kept: Vec<u8> = (0..4).map(|_| received.recv_timeout(Duration::from_secs(2)).unwrap()).collect();
        assert_eq!(kept, b"kept");

        proxy.hold();
        link.write_all(b"lost").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        proxy.cut();
        proxy.restore();
        proxy.release();
        let mut buf = [0; 1];
        assert_eq!(link.read(&mut buf).unwrap_or(0), 0, "the held connection is closed by the cut");
        let mut after = TcpStream::connect(proxy.addr()).unwrap();
        after.write_all(b"next").unwrap();
        let next: Vec<u8> = (0..4).map(|_| received.recv_timeout(Duration::from_secs(2)).unwrap()).collect();
        assert_eq!(next, b"next", "the held bytes never reached the upstream");
    }

    #[test]
    fn retarget_drops_live_connections_and_forwards_new_ones_elsewhere() {
        let proxy = Proxy::start(answering(b"old!"));
        let mut before = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(&round_trip(&mut before).unwrap(), b"old!");

        proxy.retarget(answering(b"new!"));
        let mut buf = [0; 1];
        assert_eq!(before.read(&mut buf).unwrap_or(0), 0, "a connection open at the retarget is dropped");
        let mut after = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(&round_trip(&mut after).unwrap(), b"new!");
    }
}
