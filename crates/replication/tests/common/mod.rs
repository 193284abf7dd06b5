//! What the tests of the net `Server`/`Client` over the emulator share.

use lagless_netem::Duplex;
use lagless_replication::{Client, Spectator};
use std::time::Duration;

/// One step of a spectating client at `now`: what the link delivered in, its ticks
/// stepped with no input, its packets out onto the link. Returns how many packets it
/// refused (a lossy link's damage may be what a test is about, so they are counted, not
/// fatal).
pub fn step_spectator(
    client: &mut Client<Spectator<u8>>,
    link: &mut Duplex,
    now: Duration,
) -> usize {
    let mut refused = 0;
    while let Some(p) = link.down.poll(now) {
        refused += usize::from(client.receive(now, &p).is_err());
    }
    client.update(now);
    while let Some(t) = client.next_tick() {
        client.tick(t, 0);
    }
    while let Some(p) = client.poll_transmit(now) {
        link.up.send(now, p);
    }
    refused
}
