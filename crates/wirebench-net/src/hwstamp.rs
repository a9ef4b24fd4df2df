//! Whether an interface can stamp packets in hardware, and whether it does now: the
//! `ethtool -T` query (`ETHTOOL_GET_TS_INFO`: the stamping kinds the driver offers and its
//! PTP clock) and the device's current setting (`SIOCGHWTSTAMP`). A socket asks for
//! hardware stamps in any case (`stamp::enable`); they only come when the device's stamping
//! was turned on (`SIOCSHWTSTAMP`, e.g. by `hwstamp_ctl` or a PTP daemon), which changes the
//! device for every user, so wirebench reports it and leaves it to the operator.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// `ETHTOOL_GET_TS_INFO` (linux/ethtool.h).
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// `struct ethtool_ts_info` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct TsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// What an interface offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hardware {
    /// No hardware stamping (veth, loopback, most virtual NICs): software stamps only.
    None,
    /// The NIC stamps in hardware (PTP clock `phc`), but its stamping is off now.
    Off {
        /// The PTP hardware clock's index (`/dev/ptpN`).
        phc: i32,
    },
    /// The NIC stamps received packets in hardware now.
    On {
        /// The PTP hardware clock's index (`/dev/ptpN`).
        phc: i32,
    },
}

#[expect(unsafe_code, reason = "ifreq has no safe constructor in libc or nix")]
fn ifreq(name: &str, data: *mut libc::c_char) -> io::Result<libc::ifreq> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("not an interface name: {name:?}")));
    }
    // SAFETY: ifreq is plain data (a name and a union of integers and pointers); all-zero is
    // a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = s.cast_signed();
    }
    req.ifr_ifru.ifru_data = data;
    Ok(req)
}

/// Asks interface `name` what hardware stamping it offers and whether it is on.
#[expect(unsafe_code, reason = "SIOCETHTOOL and SIOCGHWTSTAMP have no safe wrapper in nix or socket2")]
pub fn query(name: &str) -> io::Result<Hardware> {
    let sock = UdpSocket::bind("0.0.0.0:0")?;
    let mut info = TsInfo { cmd: ETHTOOL_GET_TS_INFO, ..TsInfo::default() };
    let mut req = ifreq(name, (&raw mut info).cast())?;
    // SAFETY: SIOCETHTOOL reads `req` (a NUL-terminated name, checked above) and writes at
    // most size_of::<TsInfo>() bytes through ifru_data, which points at `info`, alive and
    // exclusively borrowed for the call.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &raw mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = libc::SOF_TIMESTAMPING_RAW_HARDWARE | libc::SOF_TIMESTAMPING_RX_HARDWARE;
    if info.so_timestamping & raw != raw || info.phc_index < 0 {
        return Ok(Hardware::None);
    }
    let phc = info.phc_index;
    let mut cfg = libc::hwtstamp_config { flags: 0, tx_type: 0, rx_filter: 0 };
    let mut req = ifreq(name, (&raw mut cfg).cast())?;
    // SAFETY: SIOCGHWTSTAMP writes one hwtstamp_config through ifru_data, which points at
    // `cfg`, alive and exclusively borrowed for the call.
    let on = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGHWTSTAMP, &raw mut req) } == 0
        && cfg.rx_filter != libc::HWTSTAMP_FILTER_NONE.cast_signed();
    Ok(if on { Hardware::On { phc } } else { Hardware::Off { phc } })
}

/// One line on the hardware stamping of interface `name`, for a report's notes.
pub fn note(name: &str) -> String {
    match query(name) {
        Ok(Hardware::None) => format!("hardware timestamps: {name} has none (software timestamps used)"),
        Ok(Hardware::Off { phc }) => format!(
            "hardware timestamps: {name} can stamp in hardware (PTP clock /dev/ptp{phc}) but its stamping is off: \
             software timestamps used (turn it on with `hwstamp_ctl -i {name} -r 1 -t 1`; it applies to the device)"
        ),
        Ok(Hardware::On { phc }) => {
            format!("hardware timestamps: {name} stamps in hardware (PTP clock /dev/ptp{phc})")
        }
        Err(e) => format!("hardware timestamps: {name} could not be asked ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_no_hardware_stamping_and_bad_names_are_refused() {
        assert_eq!(query("lo").unwrap(), Hardware::None);
        assert_eq!(note("lo"), "hardware timestamps: lo has none (software timestamps used)");
        for bad in ["", "a-name-longer-than-ifnamsiz", "nul\0name"] {
            assert_eq!(query(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        assert!(query("no-such-if0").is_err());
    }
}
