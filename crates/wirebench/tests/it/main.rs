//! The one integration test binary (STYLE C12): one module per mode.

// Test arithmetic on small known values.
#![allow(clippy::cast_possible_truncation, clippy::cast_precision_loss, clippy::cast_sign_loss)]

mod alloc; // the measured loop allocates nothing per probe (counting allocator)
mod attribution; // kernel timestamps split the round trip (loopback, veth), notes where a kind is missing
mod cli; // bad input, absent and dead peers, Ctrl-C: exit codes and partial reports
mod docs; // what a newcomer reads: every flag documented, docs stand alone, the suite steps as documented
mod doctor; // verdicts on loopback, bad flags; in namespaces: veth MTU 1400, no multicast route, path MTU
mod fake; // the engine on the in-memory link: loss, lateness, CO correction, one-way
mod hiccup; // the stall meter: a 200 ms SIGSTOP seen whole, a quiet run, every mode carries it
mod hostile; // serve against hostile clients: numbers, caps, knocks, tokens, stalls, signals
#[cfg(feature = "netns-tests")]
mod lab; // the namespace harness: namespaces, veths and processes removed on drop
mod layers; // the binary's floors: commands import the ground floor, never each other
mod listen; // listen: DatagramTest's gap lines, the publisher budget
mod load; // WebSocket load against an in-process room: delay, thresholds, dead server
mod load_health; // the load generator's own health: kept, missed, the same words everywhere, merged shards
mod load_rows; // the all row of a relayed and a request type: the sum of the event rows in the JSON, the terminal, report and the HTML
mod load_shards; // load --shard/--start-at in namespaces, report --merge exact and refusing, the k8s Job's flags
mod load_tls; // load for real apps: wss:// to room --tls-*, wrong CA/name, --insecure, headers, cookies, subprotocols, tokens
mod load_toml; // the scenario file's TLS and request keys: reach the server, flags override, bad values exit 2
mod mesh; // mesh agents on loopback: the matrix, views agreeing, peers coming and going, tokens, HTTP bounds
mod mesh_farend; // the prober against a peer flooding its TCP probe connection (16 KiB per wake-up, flat memory) and one answering garbage (dropped, counted)
mod mesh_formats; // /metrics in text 0.0.4 (the default), OpenMetrics and protobuf: the same series, and per-peer native histograms holding each cell's round trips
mod mesh_http; // the agent's HTTP side against keep-alive hogs: per-source shares, eviction of the idlest, reserved probe places, the idle deadline
#[cfg(feature = "netns-tests")]
mod mesh_k8s; // EndpointSlice discovery against a real kube-apiserver; the manifests pass server validation
#[cfg(feature = "netns-tests")]
mod mesh_native; // two agents scraped by a real Prometheus with native histograms: the p99 of the summed histograms is the merged HdrHistograms' p99, to the bucket
#[cfg(feature = "netns-tests")]
mod mesh_netns; // six agents in namespaces, a real Prometheus, node/path impairments, a killed agent
mod mesh_sockets; // the prober's UDP sockets: per-peer ones past the descriptor share fall back to the shared one; one probe port per agent
mod mesh_stalls; // the agent's stall samples: the prober's own wake-ups by default (no meter thread), a thread with --hiccup-interval
mod mesh_stamp; // STAMP reflectors as mesh members: a measured column, an empty labelled row, named when they lose probes
mod mesh_status; // mesh status: nothing judged yet (exit 1 in every view); many and misbehaving agents, fetched within a concurrency and a budget
#[cfg(feature = "netns-tests")]
mod multicast_relay; // wirebench relay in namespaces: across a router, two on a segment, forged datagrams, --check, peers file
mod netns; // namespaces: ping across a veth pair, multicast across a bridge (root)
mod output; // result files: --json - to stdout, devices, unwritable paths, SIGTERM mid-run
mod ping; // loopback UDP and TCP against an in-process serve; schema; hgrm; hlog
mod proxy; // impairment proxy accuracy, loss, TCP rate, active-time rate, delay split, refusals
mod relay; // a scripted WebSocket server for the load tests: echo, or a relay that loses on purpose
#[cfg(feature = "netns-tests")]
mod relay_fresh; // the relay against replays and spoofing: a replayed "seen" after its carrier stops, a capture from an earlier run, 300 spoofed senders
#[cfg(feature = "netns-tests")]
mod relay_sendbuf; // the relay's fan-out and re-emission meeting a full send buffer (tbf, tiny SO_SNDBUF): resumed in order, nothing lost; one wait per re-emitted batch
#[cfg(feature = "netns-tests")]
mod relay_slots; // the relay's peer table over its life: 1,024 peers leave the list and go quiet, 1,024 new ones wait and take their slots, one comes back fresh; rows + retired = totals
mod report; // text, HTML and --compare of saved runs; environment capture; bad input exits 2
mod report_merge; // report --merge of load shards: exit 3 on merged thresholds, missing shards, --partial, run windows
mod room; // the room against hostile clients: requests, refusals, caps, slow members, slowloris, EMFILE
mod screen; // one screen: each command's default output within 24 lines of 100 characters, -q one line per target
mod serve_noise; // 100,000 bad datagrams at serve during a ping
mod shape; // shape tc: the script; in namespaces apply/clear, foreign qdiscs left alone, NAT clients classified
#[cfg(feature = "netns-tests")]
mod stamp; // STAMP against stamp-suite 1.0.0 both ways, both modes and formats, the wire decoded by scapy
mod stamp_reflector; // serve --stamp packet by packet: stateful numbering, allow-list, rate cap, authentication, each refusal counted
mod stream; // stream and listen on loopback: complete, both sides, reverse only to the client
#[cfg(feature = "netns-tests")]
mod stream_loss; // in namespaces: a tiny receive buffer blamed on RcvbufErrors, a loopback stream's GRO runs counted in datagrams, a router's tbf drops elsewhere on the path, the sender's own tbf drops on the sending host
mod stream_rates; // one time base, interval rows and live lines, kernel counters, input rules
#[cfg(feature = "netns-tests")]
mod stream_search; // in namespaces: the loss-free rate through a router's 50 Mbit/s tbf is within 1 % of the payload rate its counters say it passes
mod stream_stamps; // the stream receiver's kernel RX stamps: never after the read, the same in every view, a note without them
#[cfg(feature = "netns-tests")]
mod stream_tcp_rate; // in namespaces: a TCP stream of four connections through a tbf is at most the link's rate, as the tbf's own counter says
mod suite; // the suite's steps and files
mod support; // in-process serve and CLI runs, the report schema
