//! The RFC 8797 example as a program: an RPC-over-RDMA client and server
//! that agree on their inline thresholds through MPA private data (the
//! protocol and its checks are `uwarp_interop::nfs`). Run both in one
//! process, or `-s` and `-c -a ADDR` in two.

use std::net::ToSocketAddrs;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use uwarp::{Device, DeviceConfig};
use uwarp_interop::nfs::{
    demo_calls, run_client, run_server, ClientOutcome, Result, ServerOutcome, Settings,
};

// ---------------------------------------------------------------------
// The command line.

/// RFC 8797 private data between an RPC-over-RDMA client and server.
#[derive(Debug, Parser)]
#[command(name = "nfs_private_data")]
struct Cli {
    /// Run only the server.
    #[arg(short = 's', conflicts_with = "client")]
    server: bool,
    /// Run only the client (needs -a).
    #[arg(short = 'c')]
    client: bool,
    /// Address to listen on or connect to.
    #[arg(short = 'a', default_value = "127.0.0.1")]
    addr: String,
    /// Port (0: any, for the one-process run).
    #[arg(short = 'p', default_value_t = 20049)]
    port: u16,
    /// This side's Send Size in octets.
    #[arg(long, default_value_t = 4096)]
    send_size: u32,
    /// This side's Receive Size in octets.
    #[arg(long, default_value_t = 4096)]
    receive_size: u32,
    /// Clear R: no remote invalidation.
    #[arg(long)]
    no_remote_invalidation: bool,
    /// Send no RFC 8797 private data at all.
    #[arg(long)]
    no_private_data: bool,
    /// Server settings for the one-process run: Send Size.
    #[arg(long, default_value_t = 16384)]
    server_send_size: u32,
    /// Server settings for the one-process run: Receive Size.
    #[arg(long, default_value_t = 2048)]
    server_receive_size: u32,
}

fn print_client(outcome: &ClientOutcome) {
    println!("client: server announced {:?}", outcome.server_announced);
    println!("client: {}", outcome.agreement);
    for call in &outcome.calls {
        println!(
            "client: xid {} {:?}: call Send {} octets{}{}{}, reply Send {} octets{}, invalidated {}",
            call.xid,
            call.call,
            call.call_send_len,
            if call.long_call { " (Long Call, read chunk)" } else { "" },
            if call.write_chunk { ", write chunk" } else { "" },
            if call.reply_chunk { ", reply chunk" } else { "" },
            call.reply_send_len,
            if call.reply_in_chunk { " (reply in the reply chunk)" } else { "" },
            call.invalidated
                .map_or("nothing".to_string(), |stag| format!("{stag:#x}")),
        );
    }
}

fn print_server(outcome: &ServerOutcome) {
    println!("server: client announced {:?}", outcome.client_announced);
    println!("server: {}", outcome.agreement);
    for reply in &outcome.replies {
        println!(
            "server: xid {}: call Send {} octets{}, reply Send {} octets{}{}, invalidated {}",
            reply.xid,
            reply.call_send_len,
            if reply.long_call {
                " (read the Long Call)"
            } else {
                ""
            },
            reply.reply_send_len,
            if reply.wrote_data_chunk {
                ", data written to the write chunk"
            } else {
                ""
            },
            if reply.wrote_reply_chunk {
                ", reply written to the reply chunk"
            } else {
                ""
            },
            reply
                .invalidated
                .map_or("nothing".to_string(), |stag| format!("{stag:#x}")),
        );
    }
}

fn run(cli: &Cli) -> Result<()> {
    let timeout = Duration::from_secs(30);
    let mine = Settings {
        announce: !cli.no_private_data,
        remote_invalidation: !cli.no_remote_invalidation,
        send_size: cli.send_size,
        receive_size: cli.receive_size,
    };
    let addr = (cli.addr.as_str(), cli.port)
        .to_socket_addrs()?
        .next()
        .ok_or("the address resolves to nothing")?;
    let device = Device::open(DeviceConfig::default())?;
    if cli.server {
        let listener = device.listen(addr)?;
        println!("listening on {}", listener.local_addr());
        print_server(&run_server(&device, &listener, &mine, timeout)?);
    } else if cli.client {
        print_client(&run_client(&device, addr, &mine, &demo_calls(), timeout)?);
    } else {
        // Both in one process: this side's settings for the client, the
        // --server-* ones for the server.
        let server_settings = Settings {
            send_size: cli.server_send_size,
            receive_size: cli.server_receive_size,
            ..mine
        };
        let listener = device.listen(addr)?;
        let addr = listener.local_addr();
        let server = std::thread::scope(|scope| {
            let server = scope.spawn(|| run_server(&device, &listener, &server_settings, timeout));
            let client = Device::open(DeviceConfig::default())?;
            print_client(&run_client(&client, addr, &mine, &demo_calls(), timeout)?);
            server.join().map_err(|_| "the server thread panicked")?
        })?;
        print_server(&server);
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(&Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("nfs_private_data: {err}");
            ExitCode::FAILURE
        }
    }
}
