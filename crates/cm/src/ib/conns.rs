//! The connection table: connections by local communication ID, the IDs
//! handed out, and the two indexes by which a peer's MAD finds its
//! connection — the peer's connection (duplicate REQ / REP detection) and
//! a SIDR_REQ in progress. The indexes change only with the connection
//! they point to, here.

use std::collections::HashMap;

use rdmakit_proto::Instant;

use crate::Gid;

use super::conn::{Conn, SidrKey};
use super::{ConnType, PathRec, RemoteKey, State};

/// The connection table.
#[derive(Debug)]
pub(super) struct Conns {
    conns: HashMap<u32, Conn>,
    next_id: u32,
    /// Local IDs are `next_id ^ id_operand`, as Linux scrambles them.
    id_operand: u32,
    /// The peer's connection → local ID.
    remote_ids: HashMap<RemoteKey, u32>,
    /// (peer's QP1, request ID) → local ID of a SIDR_REQ in progress.
    sidr_ids: HashMap<SidrKey, u32>,
}

impl Conns {
    /// An empty table whose IDs start from `next_id ^ id_operand`.
    pub(super) fn new(next_id: u32, id_operand: u32) -> Conns {
        Conns {
            conns: HashMap::new(),
            next_id,
            id_operand,
            remote_ids: HashMap::new(),
            sidr_ids: HashMap::new(),
        }
    }

    /// A new idle connection to the peer whose QP1 is at `peer`; its
    /// local ID (never 0, never one in use).
    pub(super) fn alloc(&mut self, conn_type: ConnType, peer: Gid, path: PathRec) -> u32 {
        loop {
            let id = self.next_id ^ self.id_operand;
            self.next_id = self.next_id.wrapping_add(1);
            if id != 0 && !self.conns.contains_key(&id) {
                self.conns.insert(id, Conn::new(id, conn_type, peer, path));
                return id;
            }
        }
    }

    /// A connection.
    pub(super) fn get(&self, id: u32) -> Option<&Conn> {
        self.conns.get(&id)
    }

    /// A connection, to change.
    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut Conn> {
        self.conns.get_mut(&id)
    }

    /// Every connection.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Conn> {
        self.conns.values()
    }

    /// Every connection, to change.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Conn> {
        self.conns.values_mut()
    }

    /// How many (any state, timewait included).
    pub(super) fn len(&self) -> usize {
        self.conns.len()
    }

    /// The connection `local` expecting `remote` as the peer's ID (0: any
    /// peer ID as long as ours has none yet).
    pub(super) fn acquire(&self, local: u32, remote: u32) -> Option<u32> {
        let c = self.conns.get(&local)?;
        (c.remote_id == remote).then_some(local)
    }

    /// The connection tied to the peer's connection `key`.
    pub(super) fn by_remote(&self, key: &RemoteKey) -> Option<u32> {
        self.remote_ids.get(key).copied()
    }

    /// Ties connection `id` to the peer's connection `key` (comm ID
    /// `remote_id`) and moves it to `state`; `None` when it is gone.
    pub(super) fn bind_remote(
        &mut self,
        id: u32,
        key: RemoteKey,
        remote_id: u32,
        state: State,
    ) -> Option<&mut Conn> {
        self.remote_ids.insert(key, id);
        let c = self.conns.get_mut(&id)?;
        c.bind(key, remote_id, state);
        Some(c)
    }

    /// Whether a SIDR_REQ known as `key` is in progress.
    pub(super) fn sidr_pending(&self, key: &SidrKey) -> bool {
        self.sidr_ids.contains_key(key)
    }

    /// Indexes connection `id` as answering the SIDR_REQ `key`.
    pub(super) fn bind_sidr(&mut self, id: u32, key: SidrKey) -> Option<&mut Conn> {
        self.sidr_ids.insert(key, id);
        self.conns.get_mut(&id)
    }

    /// The SIDR_REQ `key` was answered.
    pub(super) fn forget_sidr(&mut self, key: &SidrKey) {
        self.sidr_ids.remove(key);
    }

    /// Connection `id` back to idle, untied from the peer's.
    pub(super) fn reset(&mut self, id: u32) {
        if let Some(k) = self.conns.get_mut(&id).and_then(Conn::reset) {
            self.remote_ids.remove(&k);
        }
    }

    /// Connection `id` into timewait, untied from the peer's.
    pub(super) fn enter_timewait(&mut self, now: Instant, id: u32) {
        if let Some(k) = self.conns.get_mut(&id).and_then(|c| c.enter_timewait(now)) {
            self.remote_ids.remove(&k);
        }
    }

    /// Removes connection `id` and its index entries.
    pub(super) fn remove(&mut self, id: u32) {
        if let Some(c) = self.conns.remove(&id) {
            let (remote, sidr) = c.keys();
            if let Some(k) = remote {
                self.remote_ids.remove(&k);
            }
            if let Some(k) = sidr {
                self.sidr_ids.remove(&k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdmakit_wire::cm::sidr_req;

    /// The indexes follow their connection: a reset one is no longer the
    /// peer's, a removed one no longer answers its SIDR_REQ, and no ID is 0.
    #[test]
    fn a_connection_takes_its_index_entries_with_it() {
        let mut t = Conns::new(5, 5);
        let peer = [7; 16];
        let a = t.alloc(ConnType::Rc, peer, PathRec::default());
        assert_eq!(a, 6 ^ 5, "5 ^ 5 is 0, which is never an ID");
        let key = (peer, 0x1000, 9);
        t.bind_remote(a, key, 9, State::ReqRcvd).unwrap();
        assert_eq!(t.by_remote(&key), Some(a));
        assert_eq!(t.acquire(a, 9), Some(a));
        assert_eq!(t.acquire(a, 0), None);
        t.reset(a);
        assert_eq!(t.by_remote(&key), None);
        assert_eq!(t.get(a).map(|c| c.state), Some(State::Idle));

        let b = t.alloc(ConnType::Sidr, peer, PathRec::default());
        let sidr = (peer, 42);
        let m = sidr_req::Repr {
            request_id: 42,
            ..sidr_req::Repr::default()
        };
        t.bind_sidr(b, sidr).unwrap().accept_sidr_req(sidr, 1, &m);
        assert!(t.sidr_pending(&sidr));
        t.remove(b);
        assert!(!t.sidr_pending(&sidr));
        assert_eq!(t.len(), 1);
    }
}
