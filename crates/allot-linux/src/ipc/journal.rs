//! sd_journal_send(3) without libsystemd: one journal entry of structured fields per
//! datagram to journald's native socket ([`SOCKET`]), as systemd's "Native Journal
//! Protocol" (systemd.io/JOURNAL_NATIVE_PROTOCOL) describes it:
//! - a field is `NAME=value\n`, or, when the value holds a newline, `NAME\n`, the value's
//!   length as a little-endian u64, the value, `\n` ([`encode`]); values are bytes (any,
//!   NUL included);
//! - a name is 1..64 of A-Z, 0-9 and `_`, not starting with `_` (journald's trusted
//!   fields, which it drops from clients) or a digit: journald's own `journal_field_valid`;
//! - an entry too big for one datagram (EMSGSIZE, ENOBUFS or ENOMEM from the kernel, as
//!   libsystemd's journal-send.c reads them) goes as a sealed memfd passed with
//!   SCM_RIGHTS in an otherwise empty datagram, which journald reads instead.
//!
//! Each value is cut at [`MAX_VALUE`] bytes, the cut said in the value, so no caller can
//! make an entry unbounded. Whether to use the journal is the caller's choice:
//! [`stderr_is_journal`] says whether systemd connected stderr to it.

use crate::{Error, Result};
use std::borrow::Cow;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::mem::zeroed;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// journald's native socket.
pub const SOCKET: &str = "/run/systemd/journal/socket";
/// The most bytes of one value sent; a longer one is cut and says so.
pub const MAX_VALUE: usize = 64 * 1024;
/// The longest field name journald takes.
pub const MAX_NAME: usize = 64;
/// How long a send may wait for room in journald's queue before it fails (and the caller
/// writes its line to stderr instead): a wedged journald must not hold the caller forever.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// What a field name may be, for the error that refuses one.
const NAME_RULE: &str = "1 to 64 of A-Z, 0-9 and _, not starting with _ or a digit";

/// Is `name` a field name journald takes from a client?
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME
        && b[0] != b'_'
        && !b[0].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
}

/// A value as sent: whole up to [`MAX_VALUE`] bytes, else its start (back to a UTF-8
/// character boundary) and `…(N bytes, cut)`, together at most [`MAX_VALUE`] bytes.
fn bounded(v: &[u8]) -> Cow<'_, [u8]> {
    if v.len() <= MAX_VALUE {
        return Cow::Borrowed(v);
    }
    let note = format!("…({} bytes, cut)", v.len());
    let mut n = MAX_VALUE - note.len();
    // A UTF-8 continuation byte is 10xxxxxx: stop before the character it belongs to.
    while n > 0 && v[n] & 0xC0 == 0x80 {
        n -= 1;
    }
    let mut out = v[..n].to_vec();
    out.extend_from_slice(note.as_bytes());
    Cow::Owned(out)
}

/// One entry in the native protocol's format: each field in order, by the first method
/// (`NAME=value\n`) unless the value holds a newline. A name journald would not take is
/// refused by name; nothing is encoded then.
pub fn encode(fields: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(fields.iter().map(|(n, v)| n.len() + v.len().min(MAX_VALUE) + 10).sum());
    for (name, value) in fields {
        if !valid_name(name) {
            return Err(Error::Invalid { what: "journal field name", value: name.chars().take(80).collect(), allowed: NAME_RULE });
        }
        let v = bounded(value);
        out.extend_from_slice(name.as_bytes());
        if v.contains(&b'\n') {
            out.push(b'\n');
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        } else {
            out.push(b'=');
        }
        out.extend_from_slice(&v);
        out.push(b'\n');
    }
    Ok(out)
}

/// The fields of one entry in the native protocol's format, in order (the inverse of
/// [`encode`]), for tests and tools that stand in for journald. A name journald would
/// not take, a length past the end or a field not ended by a newline is refused.
pub fn decode(mut buf: &[u8]) -> Result<Vec<(String, Vec<u8>)>> {
    let bad = |why: &str, at: &[u8]| Error::Invalid {
        what: "journal entry",
        value: format!("{why} at {:?}", String::from_utf8_lossy(&at[..at.len().min(40)])),
        allowed: "fields NAME=value\\n, or NAME\\n, a little-endian u64 length, the value and \\n",
    };
    let mut out = vec![];
    while !buf.is_empty() {
        let nl = buf.iter().position(|&b| b == b'\n').ok_or_else(|| bad("a field with no newline", buf))?;
        let line = &buf[..nl];
        let (name, value, rest) = match line.iter().position(|&b| b == b'=') {
            Some(eq) => (&line[..eq], line[eq + 1..].to_vec(), &buf[nl + 1..]),
            None => {
                let after = &buf[nl + 1..];
                let len = after.get(..8).ok_or_else(|| bad("a length cut short", after))?;
                let len = usize::try_from(u64::from_le_bytes(len.try_into().expect("8 bytes"))).unwrap_or(usize::MAX);
                let end = len.checked_add(8).filter(|e| *e < after.len()).ok_or_else(|| bad("a length past the end", line))?;
                if after[end] != b'\n' {
                    return Err(bad("a value not ended by a newline", line));
                }
                (line, after[8..end].to_vec(), &after[end + 1..])
            }
        };
        let name = std::str::from_utf8(name).ok().filter(|n| valid_name(n)).ok_or_else(|| bad("a field name journald would not take", name))?;
        out.push((name.to_string(), value));
        buf = rest;
    }
    Ok(out)
}

/// Is `fd` the journal stream systemd describes in `journal_stream` (the value of
/// `$JOURNAL_STREAM`, `DEVICE:INODE` in decimal)? Compares with fstat(2) of `fd`, as
/// systemd.exec(5) advises: a program whose stderr was redirected by a shell in the unit
/// inherits the variable but not the stream.
pub fn is_journal_stream(fd: BorrowedFd, journal_stream: &OsStr) -> bool {
    let Some((dev, ino)) = journal_stream.to_str().and_then(|s| s.split_once(':')) else { return false };
    // SAFETY: fstat fills a local struct; the fd is borrowed, so open.
    let mut st: libc::stat = unsafe { zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    dev.parse::<u64>() == Ok(st.st_dev) && ino.parse::<u64>() == Ok(st.st_ino)
}

/// Is this process's stderr the journal (`$JOURNAL_STREAM` names fd 2's device and inode)?
pub fn stderr_is_journal() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some_and(|v| is_journal_stream(io::stderr().as_fd(), &v))
}

/// How an entry went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// As one datagram.
    Datagram,
    /// Too big for a datagram: as a sealed memfd.
    Memfd,
}

/// A sender of entries to one native journal socket.
#[derive(Debug)]
pub struct Journal {
    socket: PathBuf,
    sock: UnixDatagram,
}

impl Journal {
    /// A sender to `socket` ([`SOCKET`] for journald; tests bind their own).
    pub fn new(socket: impl Into<PathBuf>) -> Result<Self> {
        let sys = |call: &'static str| move |source| Error::Sys { call: call.into(), source };
        let sock = UnixDatagram::unbound().map_err(sys("socket(AF_UNIX, SOCK_DGRAM)"))?;
        sock.set_write_timeout(Some(SEND_TIMEOUT)).map_err(sys("setsockopt(SO_SNDTIMEO)"))?;
        Ok(Self { socket: socket.into(), sock })
    }

    /// The socket entries go to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends one entry of `fields` (in order): as a datagram, or as a sealed memfd when the
    /// kernel says it is too big for one. A name journald would not take sends nothing.
    pub fn send(&self, fields: &[(&str, &[u8])]) -> Result<Sent> {
        let entry = encode(fields)?;
        let e = loop {
            match self.sock.send_to(&entry, &self.socket) {
                Ok(_) => return Ok(Sent::Datagram),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break e,
            }
        };
        if matches!(e.raw_os_error(), Some(libc::EMSGSIZE | libc::ENOBUFS | libc::ENOMEM)) {
            self.send_memfd(&entry)?;
            return Ok(Sent::Memfd);
        }
        Err(Error::Sys { call: format!("sendto({}, an entry of {} bytes)", self.socket.display(), entry.len()), source: e })
    }

    /// The protocol's second form: `entry` in a memfd sealed against any change (journald
    /// takes only a sealed one), passed alone in an empty datagram.
    fn send_memfd(&self, entry: &[u8]) -> Result<()> {
        let sys = |call: String| move |source| Error::Sys { call, source };
        // SAFETY: a constant C string; the returned fd is owned at once.
        let fd = unsafe { libc::memfd_create(c"allot-journal".as_ptr(), libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(sys("memfd_create(allot-journal)".into())(io::Error::last_os_error()));
        }
        // SAFETY: fd is a new descriptor nothing else owns.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.write_all(entry).map_err(sys(format!("write {} bytes to a memfd", entry.len())))?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on an fd this function owns.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(sys("fcntl(memfd, F_ADD_SEALS)".into())(io::Error::last_os_error()));
        }
        let to = UnixDatagram::unbound().map_err(sys("socket(AF_UNIX, SOCK_DGRAM)".into()))?;
        to.connect(&self.socket).map_err(sys(format!("connect({})", self.socket.display())))?;
        to.set_write_timeout(Some(SEND_TIMEOUT)).map_err(sys("setsockopt(SO_SNDTIMEO)".into()))?;
        // SAFETY: CMSG_SPACE is pure arithmetic.
        let space = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        // SAFETY: an all-zero msghdr is valid: no name (connected), no data; the control
        // buffer set below outlives the call.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds one SCM_RIGHTS header with one fd.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), file.as_raw_fd());
        }
        loop {
            // SAFETY: msg points at live buffers; MSG_NOSIGNAL: no SIGPIPE.
            if unsafe { libc::sendmsg(to.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(sys(format!("sendmsg({}, a memfd of {} bytes)", self.socket.display(), entry.len()))(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("allot-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn fields_are_encoded_as_the_protocol_says() {
        let e = encode(&[("MESSAGE", b"audit: uid 0 fund"), ("PRIORITY", b"6")]).unwrap();
        assert_eq!(e, b"MESSAGE=audit: uid 0 fund\nPRIORITY=6\n");
        // A newline: the name, a newline, the length (little-endian u64), the value, a newline.
        let e = encode(&[("ALLOT_REFUSED", b"two\nlines")]).unwrap();
        assert_eq!(e, b"ALLOT_REFUSED\n\x09\0\0\0\0\0\0\0two\nlines\n");
        // Bytes that are not UTF-8, NUL and '=' pass unchanged.
        let odd: &[u8] = b"\xff\xfe\0a=b\x1b[2K";
        let e = encode(&[("X", odd), ("Y", b"")]).unwrap();
        assert_eq!(e, [b"X=".as_slice(), odd, b"\nY=\n"].concat());
        let back = decode(&encode(&[("A", b"1"), ("B_2", b"x\ny\n"), ("C", odd), ("A", b"again")]).unwrap()).unwrap();
        let want: Vec<(String, Vec<u8>)> =
            vec![("A".into(), b"1".to_vec()), ("B_2".into(), b"x\ny\n".to_vec()), ("C".into(), odd.to_vec()), ("A".into(), b"again".to_vec())];
        assert_eq!(back, want, "decode inverts encode, repeated names and order kept");
    }

    #[test]
    fn a_name_journald_would_not_take_is_refused_by_name() {
        for name in ["_UID", "message", "9LIVES", "", "A-B", "A=B", "A\nB", "ÄÖ", &"X".repeat(65)] {
            let e = encode(&[("MESSAGE", b"m"), (name, b"v")]).unwrap_err().to_string();
            assert!(e.starts_with("journal field name ") && e.contains("1 to 64 of A-Z, 0-9 and _"), "{name:?}: {e}");
        }
        assert!(valid_name(&"X".repeat(64)) && valid_name("A_1") && valid_name("X_"));
        assert!(decode(b"_PID=1\n").is_err(), "the decoder holds names to the same rule");
        assert!(decode(b"MESSAGE=no newline").is_err());
        assert!(decode(b"M\n\x09\0\0\0\0\0\0\0short\n").is_err(), "a length past the end");
        assert!(decode(b"M\n\x01\0\0\0\0\0\0\0ab").is_err(), "a value not ended by a newline");
        assert!(decode(b"M\n\xff\xff\xff\xff\xff\xff\xff\xffx\n").is_err(), "a length that overflows");
    }

    #[test]
    fn a_long_value_is_cut_and_says_so() {
        let long = "é".repeat(MAX_VALUE); // two bytes each: the cut falls inside a character
        let f = decode(&encode(&[("M", long.as_bytes())]).unwrap()).unwrap();
        let v = String::from_utf8(f[0].1.clone()).expect("cut at a character boundary");
        assert!(v.len() <= MAX_VALUE && v.ends_with(&format!("…({} bytes, cut)", 2 * MAX_VALUE)), "{}", &v[v.len() - 30..]);
        assert!(v.starts_with("éé"));
        let exact = vec![b'a'; MAX_VALUE];
        assert_eq!(decode(&encode(&[("M", &exact)]).unwrap()).unwrap()[0].1, exact, "a value of MAX_VALUE bytes is whole");
    }

    #[test]
    fn an_entry_reaches_a_bound_socket_and_a_big_one_goes_as_a_sealed_memfd() {
        let d = dir("send");
        let path = d.join("socket");
        let rx = UnixDatagram::bind(&path).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let j = Journal::new(&path).unwrap();
        assert_eq!(j.send(&[("MESSAGE", b"hello\nworld"), ("PRIORITY", b"6")]).unwrap(), Sent::Datagram);
        let mut buf = vec![0u8; 4096];
        let n = rx.recv(&mut buf).unwrap();
        let got = decode(&buf[..n]).unwrap();
        assert_eq!(got, vec![("MESSAGE".into(), b"hello\nworld".to_vec()), ("PRIORITY".into(), b"6".to_vec())]);
        // 100 values of 64 KiB: past the largest datagram the kernel takes, the send buffer
        // (net.core.wmem_default, 208 KiB unless raised).
        let big = vec![b'v'; MAX_VALUE];
        let names: Vec<String> = (0..100).map(|i| format!("F{i}")).collect();
        let fields: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), big.as_slice())).collect();
        assert_eq!(j.send(&fields).unwrap(), Sent::Memfd);
        let mut r = crate::ipc::peer::recv_with_creds(rx.as_fd(), &mut buf, 1).unwrap();
        assert_eq!((r.len, r.fds.len()), (0, 1), "an empty datagram carrying one fd");
        let memfd = std::fs::File::from(r.fds.pop().unwrap());
        // SAFETY: fcntl on an fd the test owns.
        let seals = unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_GET_SEALS) };
        let want = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        assert_eq!(seals & want, want, "sealed, as journald requires");
        let len = memfd.metadata().unwrap().len() as usize;
        let mut entry = vec![0u8; len];
        memfd.read_exact_at(&mut entry, 0).unwrap();
        let got = decode(&entry).unwrap();
        assert_eq!(got.len(), 100);
        assert!(got.iter().zip(&names).all(|((n, v), want)| n == want && *v == big));
        // Nothing listening: an error naming the socket. The socket's file goes too: a child
        // another test forks at this moment holds a copy of rx until its exec, and the
        // socket lives on in it (a full parallel run failed so, now and then).
        drop(rx);
        std::fs::remove_file(&path).unwrap();
        let e = j.send(&[("MESSAGE", b"x")]).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_journal_stream_is_recognised_by_device_and_inode() {
        let d = dir("stream");
        let f = std::fs::File::create(d.join("f")).unwrap();
        let g = std::fs::File::create(d.join("g")).unwrap();
        let m = f.metadata().unwrap();
        use std::os::unix::fs::MetadataExt;
        let v = format!("{}:{}", m.dev(), m.ino());
        assert!(is_journal_stream(f.as_fd(), OsStr::new(&v)));
        assert!(!is_journal_stream(g.as_fd(), OsStr::new(&v)), "another file: a redirected stderr");
        for bad in ["", "1", ":", "x:y", &format!("{}:{}:", m.dev(), m.ino())] {
            assert!(!is_journal_stream(f.as_fd(), OsStr::new(bad)), "{bad:?}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
