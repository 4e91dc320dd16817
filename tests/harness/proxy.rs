//! A TCP proxy in front of a store (PostgreSQL, Redis or etcd), one per
//! server, so that one server can lose the store while the others keep it:
//! the fault a network partition or a dead connection pool causes, which
//! restarting the store cannot show.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    upstream: SocketAddr,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    cut: bool,
    closed: bool,
    next_id: u64,
    /// Both ends of every forwarded connection, so a cut can end them.
    live: HashMap<u64, (TcpStream, TcpStream)>,
    /// Connections accepted during a cut: held open and never answered, so the
    /// client waits as it would behind a partition instead of failing fast.
    held: Vec<TcpStream>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the proxy binds a loopback port");
        let addr = listener.local_addr().expect("a bound listener has an address");
        let shared = Arc::new(Shared { upstream, state: Mutex::default() });
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
        for (_, (a, b)) in state.live.drain() {
            let _ = a.shutdown(Shutdown::Both);
            let _ = b.shutdown(Shutdown::Both);
        }
    }

    /// Forwards again; the blackholed connections are closed so their clients
    /// notice and reconnect.
    pub fn restore(&self) {
        let mut state = self.shared.lock();
        state.cut = false;
        state.held.clear();
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
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        {
            let mut state = shared.lock();
            if state.closed {
                return;
            }
            if state.cut {
                state.held.push(client);
                continue;
            }
        }
        let Ok(server) = TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(2)) else { continue };
        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { continue };
        let mut state = shared.lock();
        if state.cut {
            // Cut while connecting upstream: this connection must not slip through.
            state.held.push(client);
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

/// Copies one direction until either side closes, then ends both directions.
fn spawn_pump(shared: Arc<Shared>, id: u64, mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _: io::Result<u64> = io::copy(&mut from, &mut to);
        end(&shared, id);
    });
}

fn end(shared: &Shared, id: u64) {
    if let Some((a, b)) = shared.lock().live.remove(&id) {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

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
}
