//! Control frames on a TCP connection: blocking send and receive of one `Control` message
//! (`wirebench_core::wire::control` has the format).

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;

use wirebench_core::wire::control::{self, Control};

/// Sends one message.
pub fn send(conn: &mut TcpStream, msg: &Control) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(control::HEADER_LEN + body.len());
    frame.extend_from_slice(&control::header(body.len()));
    frame.extend_from_slice(&body);
    conn.write_all(&frame)
}

/// Reads the body of a control frame whose header was already read.
pub fn read_body(conn: &mut TcpStream, header: &[u8; control::HEADER_LEN]) -> io::Result<Control> {
    let len = control::body_len(header).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))
}

/// Reads one whole message. A read timeout on the socket surfaces as `WouldBlock` or
/// `TimedOut` only when no byte of the frame had arrived yet.
pub fn recv(conn: &mut TcpStream) -> io::Result<Control> {
    let mut h = [0u8; control::HEADER_LEN];
    let n = conn.read(&mut h[..1])?;
    if n == 0 {
        return Err(ErrorKind::UnexpectedEof.into());
    }
    read_rest(conn, &mut h[1..])?;
    read_body(conn, &h)
}

/// `read_exact` that rides out read timeouts once a frame has begun.
fn read_rest(conn: &mut TcpStream, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match conn.read(buf) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// True for the errors a read timeout gives.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Reads one message whose first bytes (`prefix`) were already read from `conn`.
pub fn recv_after(prefix: &[u8], conn: &mut TcpStream) -> io::Result<Control> {
    let mut data = prefix.to_vec();
    let mut fill = |data: &mut Vec<u8>, want: usize| -> io::Result<()> {
        if data.len() < want {
            let at = data.len();
            data.resize(want, 0);
            read_rest(conn, &mut data[at..])?;
        }
        Ok(())
    };
    fill(&mut data, control::HEADER_LEN)?;
    let mut h = [0u8; control::HEADER_LEN];
    h.copy_from_slice(&data[..control::HEADER_LEN]);
    let len = control::body_len(&h).map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
    fill(&mut data, control::HEADER_LEN + len)?;
    serde_json::from_slice(&data[control::HEADER_LEN..control::HEADER_LEN + len])
        .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))
}
