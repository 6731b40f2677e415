//! Connections that have not authenticated yet on a SASL listener. Such a peer has proven
//! nothing, so it holds little: frames of at most [`MAX_FRAME`] bytes (Kafka's cap before
//! authentication), [`AUTHENTICATE_WITHIN`] to finish the exchange, and a place among at
//! most [`MAX_PER_LISTENER`] such connections on its listener and [`MAX_PER_ADDRESS`] from
//! its source address; past either bound a new connection is closed at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// The largest frame read before authentication (Kafka's 512 KiB): a SASL message is far
/// smaller, and ApiVersions too.
pub const MAX_FRAME: usize = 512 * 1024;

/// How long a connection may take from its accept to a completed SASL exchange, by default
/// (`BrokerConfig::sasl_authenticate_within`).
pub const AUTHENTICATE_WITHIN: Duration = Duration::from_secs(30);

/// Unauthenticated connections one listener holds at most.
pub const MAX_PER_LISTENER: usize = 1000;

/// Unauthenticated connections one source address holds at most, over every listener.
pub const MAX_PER_ADDRESS: usize = 256;

#[derive(Debug, Default)]
struct Counts {
    by_listener: HashMap<String, usize>,
    by_address: HashMap<IpAddr, usize>,
}

/// The unauthenticated connections a broker holds, by listener and source address.
#[derive(Debug, Default)]
pub(crate) struct Unauthenticated {
    counts: Mutex<Counts>,
}

/// One unauthenticated connection's place; dropped when it authenticates or closes.
#[derive(Debug)]
pub(crate) struct Place {
    of: Arc<Unauthenticated>,
    listener: String,
    address: IpAddr,
}

impl Unauthenticated {
    /// A place for a new connection on `listener` from `address`, unless either is at its
    /// bound.
    pub(crate) fn admit(self: &Arc<Self>, listener: &str, address: IpAddr) -> Option<Place> {
        let mut counts = self.counts.lock();
        let on_listener = counts.by_listener.get(listener).copied().unwrap_or(0);
        let from_address = counts.by_address.get(&address).copied().unwrap_or(0);
        if on_listener >= MAX_PER_LISTENER || from_address >= MAX_PER_ADDRESS {
            return None;
        }
        *counts.by_listener.entry(listener.to_owned()).or_default() += 1;
        *counts.by_address.entry(address).or_default() += 1;
        Some(Place {
            of: Arc::clone(self),
            listener: listener.to_owned(),
            address,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.of.counts.lock();
        let counts = &mut *counts;
        if let Some(n) = counts.by_listener.get_mut(&self.listener) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_listener.remove(&self.listener);
            }
        }
        if let Some(n) = counts.by_address.get_mut(&self.address) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_address.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_address_and_per_listener_and_come_back() {
        let unauthenticated = Arc::new(Unauthenticated::default());
        let one: IpAddr = [10, 0, 0, 1].into();
        let mut held: Vec<Place> = (0..MAX_PER_ADDRESS)
            .map(|_| unauthenticated.admit("SASL", one))
            .collect::<Option<_>>()
            .expect("places up to the bound");
        assert!(unauthenticated.admit("SASL", one).is_none());
        // The bound is the address's over every listener.
        assert!(unauthenticated.admit("OTHER", one).is_none());
        held.pop();
        assert!(unauthenticated.admit("OTHER", one).is_some());
        drop(held);
        assert!(unauthenticated.counts.lock().by_address.is_empty());

        let mut held = Vec::new();
        for i in 0..MAX_PER_LISTENER {
            let address: IpAddr = [10, 1, (i / 256) as u8, (i % 256) as u8].into();
            held.extend(unauthenticated.admit("SASL", address));
        }
        assert_eq!(held.len(), MAX_PER_LISTENER);
        assert!(unauthenticated
            .admit("SASL", [10, 2, 0, 1].into())
            .is_none());
        assert!(unauthenticated
            .admit("OTHER", [10, 2, 0, 1].into())
            .is_some());
    }
}
