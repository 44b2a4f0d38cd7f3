//! Completion channels, on both transports: the descriptor becomes
//! readable when an armed queue raises its event, once per arm, for the
//! next completion or the next solicited one (at once when armed for any
//! with completions still queued); it can be polled, made
//! non-blocking (`EAGAIN`), and a blocking read is interrupted by a
//! signal whose handler has no `SA_RESTART` (`EINTR`), as a kernel
//! driver's channel is. An event arming raised for completions the
//! application then polled is withdrawn when read, the queue armed again.

use std::io::ErrorKind;
use std::os::fd::AsRawFd;
use std::os::unix::thread::JoinHandleExt;
use std::time::Duration;

use uwarp::*;
use uwarp_testing::pair::{self, connect_devices_with_cqs, End, Role, Transport, WAIT};

use pair::{Dpdk, Socket};

uwarp_testing::on_every_transport!(
    an_armed_queue_raises_one_event_per_arm_on_its_descriptor,
    solicited_only_ignores_unsolicited_sends,
    a_non_blocking_descriptor_says_would_block,
    a_signal_without_restart_interrupts_a_blocking_read,
    arming_while_completions_arrive_loses_no_event,
    arming_a_queue_that_holds_completions_raises_its_event_at_once,
    an_event_raised_at_arming_for_completions_since_polled_is_withdrawn,
);

/// The server's token on the channel.
const SERVER_TOKEN: u64 = 0x5e_4e_e4;
/// The client's.
const CLIENT_TOKEN: u64 = 0xc1_1e_47;

/// A connection whose two queues raise their events on `channel`, with
/// `receives` receives of 64 octets posted at the server into the region
/// returned (before any test sends).
fn connect_on<T: Transport>(
    channel: &CompletionChannel,
    receives: usize,
) -> (End, End, MemoryRegion) {
    let channel = channel.clone();
    let make_cq = move |device: &Device, role: Role| {
        let token = match role {
            Role::Server => SERVER_TOKEN,
            Role::Client => CLIENT_TOKEN,
        };
        device.create_cq_with_channel(pair::CQ_DEPTH, &channel, token)
    };
    let (client, server) = connect_devices_with_cqs(
        T::devices(),
        make_cq,
        ConnectParams::default(),
        LocalParams::default(),
        |_, _| {},
    )
    .unwrap();
    let inbox = server
        .pd
        .alloc_mr(64 * receives, Access::LOCAL_WRITE)
        .unwrap();
    for i in 0..receives {
        let sgl = vec![inbox.sge(64 * i, 64)];
        server
            .qp
            .post_recv(RecvWr {
                wr_id: i as u64,
                sgl,
            })
            .unwrap();
    }
    (client, server, inbox)
}

/// Sends `text` from `client`, solicited or not, and waits for its send
/// completion.
fn send(client: &End, text: &[u8], solicited: bool) {
    let mut wr = SendWr::new(99, SendOp::Send, Payload::Inline(text.to_vec()));
    wr.solicited = solicited;
    client.qp.post_send(wr).unwrap();
    client.expect_ok();
}

/// Whether `channel`'s descriptor becomes readable within `timeout`.
fn readable(channel: &CompletionChannel, timeout: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: channel.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut fd, 1, ms) };
    ready == 1 && fd.revents & libc::POLLIN != 0
}

/// Sends `text` solicited to a server armed for solicited completions,
/// and takes the event that says the Send's completion is queued,
/// unpolled.
fn queue_one(channel: &CompletionChannel, client: &End, server: &End, text: &[u8]) {
    server.cq.req_notify(true);
    send(client, text, true);
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
}

/// Waits for the server's receive completion of a send.
fn received(server: &End) {
    let wc = server.expect_ok();
    assert_eq!(wc.opcode, WcOpcode::Recv);
}

fn an_armed_queue_raises_one_event_per_arm_on_its_descriptor<T: Transport>() {
    let channel = CompletionChannel::new().unwrap();
    let (client, server, _inbox) = connect_on::<T>(&channel, 8);
    // Not armed: a completion raises nothing.
    send(&client, b"one", false);
    received(&server);
    assert!(!readable(&channel, Duration::from_millis(200)));

    // Armed: the next completion raises one event, and only one, however
    // many completions follow.
    server.cq.req_notify(false);
    send(&client, b"two", false);
    send(&client, b"three", false);
    assert!(readable(&channel, WAIT));
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    received(&server);
    received(&server);
    assert!(!readable(&channel, Duration::from_millis(200)));

    // Armed again: one more.
    server.cq.req_notify(false);
    send(&client, b"four", false);
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    received(&server);
    assert_eq!(channel.lost_events(), 0);
}

/// An application that arms after a poll that left completions behind
/// (Debian's perftest 4.5 with `-e`) is woken for them, as on Mellanox's
/// RNICs, rather than sleeping until one more arrives.
fn arming_a_queue_that_holds_completions_raises_its_event_at_once<T: Transport>() {
    let channel = CompletionChannel::new().unwrap();
    let (client, server, _inbox) = connect_on::<T>(&channel, 4);
    queue_one(&channel, &client, &server, b"queued");

    server.cq.req_notify(false);
    assert!(readable(&channel, WAIT));
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    received(&server);

    // Empty again: arming waits for the next completion.
    server.cq.req_notify(false);
    assert!(!readable(&channel, Duration::from_millis(200)));
    send(&client, b"next", false);
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    received(&server);
    assert_eq!(channel.lost_events(), 0);
}

fn solicited_only_ignores_unsolicited_sends<T: Transport>() {
    let channel = CompletionChannel::new().unwrap();
    let (client, server, _inbox) = connect_on::<T>(&channel, 4);
    server.cq.req_notify(true);
    send(&client, b"plain", false);
    received(&server);
    assert!(!readable(&channel, Duration::from_millis(200)));
    send(&client, b"wake up", true);
    assert!(readable(&channel, WAIT));
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    received(&server);
}

fn a_non_blocking_descriptor_says_would_block<T: Transport>() {
    let channel = CompletionChannel::new().unwrap();
    let (client, server, _inbox) = connect_on::<T>(&channel, 2);
    set_non_blocking(&channel);
    assert_eq!(
        channel.get_event().unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    server.cq.req_notify(false);
    send(&client, b"now", false);
    assert!(readable(&channel, WAIT));
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    assert_eq!(
        channel.get_event().unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    received(&server);
}

fn set_non_blocking(channel: &CompletionChannel) {
    let fd = channel.as_raw_fd();
    // SAFETY: fcntl on the channel's open descriptor.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
    }
}

/// A handler that does nothing; installed without `SA_RESTART`.
extern "C" fn ignore(_: libc::c_int) {}

fn a_signal_without_restart_interrupts_a_blocking_read<T: Transport>() {
    let channel = CompletionChannel::new().unwrap();
    let (_client, _server, _inbox) = connect_on::<T>(&channel, 1);
    // SAFETY: installs a handler that does nothing for SIGUSR2, with no
    // SA_RESTART; `action` is fully initialised.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()),
            0
        );
    }
    let reader = {
        let channel = channel.clone();
        std::thread::spawn(move || channel.get_event())
    };
    // The reader blocks (nothing is armed); signal it until it returns:
    // the first signal may come before it is inside read().
    let started = std::time::Instant::now();
    while !reader.is_finished() && started.elapsed() < WAIT {
        // SAFETY: the thread has not been joined, so its pthread_t is
        // valid; SIGUSR2 has a handler, so the signal only interrupts.
        unsafe { libc::pthread_kill(reader.as_pthread_t(), libc::SIGUSR2) };
        std::thread::sleep(Duration::from_millis(50));
    }
    let outcome = reader.join().unwrap();
    assert_eq!(outcome.unwrap_err().kind(), ErrorKind::Interrupted);
}

/// The verbs pattern of a completion thread (rping's): wait for the
/// event, arm again, poll until empty, while the peer streams Sends. A
/// completion that lands between the poll and the arm must still raise
/// the event; when one was lost (the arm and the push ordered only by
/// acquire/release), the thread slept for ever with a completion queued.
fn arming_while_completions_arrive_loses_no_event<T: Transport>() {
    const MESSAGES: usize = 2000;
    let channel = CompletionChannel::new().unwrap();
    let (client, server, _inbox) = connect_on::<T>(&channel, MESSAGES);
    let sender = std::thread::spawn(move || {
        for i in 0..MESSAGES {
            let wr = SendWr::new(i as u64, SendOp::Send, Payload::Inline(vec![i as u8; 8]));
            client.qp.post_send(wr).unwrap();
        }
        for _ in 0..MESSAGES {
            client.expect_ok();
        }
        client
    });
    let mut received = 0;
    server.cq.req_notify(false);
    while received < MESSAGES {
        while let Some(wc) = server.cq.poll_one() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            received += 1;
        }
        if received == MESSAGES {
            break;
        }
        assert!(
            readable(&channel, WAIT),
            "no event after {received} of {MESSAGES} messages"
        );
        assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
        server.cq.req_notify(false);
    }
    sender.join().unwrap();
}

/// An application that arms and then polls every queued completion (fio's
/// rdma engine) reads the event arming raised for them after the fact:
/// [`CompletionQueue::channel_event_due`] withdraws it and arms the queue
/// again, so the next completion raises the next event. An event raised
/// by a completion, or one whose completions are still queued, stays due.
fn an_event_raised_at_arming_for_completions_since_polled_is_withdrawn<T: Transport>() {
    let channel = CompletionChannel::new().unwrap();
    let (client, server, _inbox) = connect_on::<T>(&channel, 4);
    queue_one(&channel, &client, &server, b"queued");
    assert!(server.cq.channel_event_due(), "raised by a completion");

    // Raised at arming, completion still queued: due.
    server.cq.req_notify(false);
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    assert!(server.cq.channel_event_due(), "its completion is queued");
    received(&server);

    // Raised at arming, completion polled before the event is read:
    // withdrawn, and the queue armed again.
    queue_one(&channel, &client, &server, b"second");
    assert!(server.cq.channel_event_due());
    server.cq.req_notify(false);
    received(&server);
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    assert!(!server.cq.channel_event_due(), "nothing left to poll");
    send(&client, b"third", false);
    assert!(readable(&channel, WAIT), "armed again by the withdrawal");
    assert_eq!(channel.get_event().unwrap(), SERVER_TOKEN);
    assert!(server.cq.channel_event_due());
    received(&server);
    assert_eq!(channel.lost_events(), 0);
}
