//! A stream of lines split as its chunks arrive (a Kubernetes watch: one JSON event a line),
//! looking at each byte once.
//!
//! The scan for a newline resumes where the last one stopped, so a line that comes in many
//! small chunks costs its length in scanning, not its length times the number of chunks (a
//! 4 MiB event in 1 KiB chunks: 4 MiB looked at, where rescanning from the line's start at
//! every chunk looked at 8 GiB). What was handed out is dropped at the next chunk, which
//! moves at most the bytes of that chunk. A line longer than the cap, whole or still
//! coming, is refused, so the buffer never holds much more than the cap and one chunk.

/// A line (or a line in progress) past the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a line longer than {max} bytes")]
pub struct LineTooLong {
    /// The cap.
    pub max: usize,
}

/// Splits chunks into lines (without their `\n`); see the module docs.
#[derive(Debug, Clone)]
pub struct Lines {
    buf: Vec<u8>,
    /// Where the first line not yet handed out starts.
    start: usize,
    /// `buf[start..scanned]` holds no newline.
    scanned: usize,
    max: usize,
    looked_at: u64,
}

impl Lines {
    /// No line longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        Self { buf: Vec::new(), start: 0, scanned: 0, max, looked_at: 0 }
    }

    /// Adds a chunk (dropping the lines already handed out).
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole line, or `None` until a chunk brings its end.
    ///
    /// # Errors
    /// [`LineTooLong`] when the line, whole or still coming, passes the cap.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, LineTooLong> {
        let rest = &self.buf[self.scanned..];
        let found = rest.iter().position(|&b| b == b'\n');
        self.looked_at += found.map_or(rest.len(), |i| i + 1) as u64;
        let Some(i) = found else {
            self.scanned = self.buf.len();
            return if self.scanned - self.start > self.max { Err(LineTooLong { max: self.max }) } else { Ok(None) };
        };
        let (from, to) = (self.start, self.scanned + i);
        if to - from > self.max {
            return Err(LineTooLong { max: self.max });
        }
        self.start = to + 1;
        self.scanned = to + 1;
        Ok(Some(&self.buf[from..to]))
    }

    /// Bytes not yet handed out (a line in progress, or lines not yet asked for).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Bytes the newline search has looked at so far (each byte once).
    pub fn looked_at(&self) -> u64 {
        self.looked_at
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The lines complete so far; more lines or bytes than any test here pushes fail the
    /// test (a reader that returns a line forever must not fill the machine).
    fn all(l: &mut Lines) -> Vec<Vec<u8>> {
        let (mut out, mut bytes) = (Vec::new(), 0);
        while let Some(line) = l.next_line().unwrap() {
            bytes += line.len();
            assert!(out.len() < 1 << 12 && bytes <= 8 << 20, "{} lines, {bytes} bytes", out.len() + 1);
            out.push(line.to_vec());
        }
        out
    }

    #[test]
    fn a_line_in_many_small_chunks_is_found_once_whole_and_each_byte_is_looked_at_once() {
        let line: Vec<u8> = (0..4u32 << 20).map(|i| b'a' + u8::try_from(i % 26).unwrap()).collect();
        let mut l = Lines::new(4 << 20);
        let mut found = Vec::new();
        for chunk in line.chunks(1024) {
            l.push(chunk);
            found.extend(all(&mut l));
        }
        assert!(found.is_empty(), "no newline yet");
        l.push(b"\n{\"next\":");
        found.extend(all(&mut l));
        assert_eq!(found.len(), 1);
        assert!(found[0] == line, "the line is whole");
        assert_eq!(l.pending(), 8, "the next line's start is kept");
        // 4 MiB + its newline, then the 8 bytes after it: once each (rescanning from the
        // line's start at every 1 KiB chunk looked at about 8 GiB).
        assert_eq!(l.looked_at(), (4 << 20) + 1 + 8);
    }

    #[test]
    fn the_cap_holds_for_a_line_in_progress_and_a_whole_one() {
        let mut l = Lines::new(10);
        l.push(b"0123456789");
        assert_eq!(l.next_line(), Ok(None), "10 bytes in progress: at the cap, not past it");
        l.push(b"x");
        assert_eq!(l.next_line(), Err(LineTooLong { max: 10 }));
        let mut l = Lines::new(10);
        l.push(b"0123456789\n0123456789x\n");
        assert_eq!(l.next_line(), Ok(Some(&b"0123456789"[..])));
        assert_eq!(l.next_line(), Err(LineTooLong { max: 10 }), "a whole line past the cap");
    }

    #[test]
    fn empty_lines_and_a_chunk_of_several_lines() {
        let mut l = Lines::new(100);
        l.push(b"a\n\nbc\nd");
        assert_eq!(all(&mut l), [b"a".to_vec(), Vec::new(), b"bc".to_vec()]);
        l.push(b"e\n");
        assert_eq!(all(&mut l), [b"de".to_vec()]);
        assert_eq!(l.pending(), 0);
    }

    #[test]
    fn the_cap_counts_only_the_line_after_those_handed_out() {
        let mut l = Lines::new(10);
        l.push(b"ab\n0123456789\n012345");
        assert_eq!(l.next_line(), Ok(Some(&b"ab"[..])));
        assert_eq!(l.next_line(), Ok(Some(&b"0123456789"[..])), "a whole line at the cap");
        assert_eq!(l.next_line(), Ok(None), "6 bytes in progress");
        l.push(b"6789x");
        assert_eq!(l.next_line(), Err(LineTooLong { max: 10 }), "11 bytes in progress");
        let mut l = Lines::new(10);
        l.push(b"ab\n0123456789x\n");
        assert_eq!(l.next_line(), Ok(Some(&b"ab"[..])));
        assert_eq!(l.next_line(), Err(LineTooLong { max: 10 }), "a whole line past the cap");
    }

    #[test]
    fn a_chunk_drops_the_lines_handed_out() {
        let mut l = Lines::new(100);
        l.push(b"abc\nde");
        assert_eq!(l.next_line(), Ok(Some(&b"abc"[..])));
        l.push(b"f");
        assert_eq!((l.buf.len(), l.pending()), (3, 3));
        assert_eq!(l.next_line(), Ok(None));
    }

    proptest! {
        /// However the stream is cut, the lines are those of `split('\n')`, and every byte is
        /// looked at exactly once.
        #[test]
        fn any_chunking_gives_the_same_lines(text in "[ab\n]{0,300}", cuts in proptest::collection::vec(0usize..300, 0..20)) {
            let bytes = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.push(0);
            cuts.push(bytes.len());
            cuts.sort_unstable();
            let mut l = Lines::new(1000);
            let mut got = Vec::new();
            for w in cuts.windows(2) {
                l.push(&bytes[w[0]..w[1]]);
                got.extend(all(&mut l));
            }
            let mut want: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let tail = want.pop().unwrap_or_default();
            prop_assert_eq!(got, want);
            prop_assert_eq!(l.pending(), tail.len());
            prop_assert_eq!(l.looked_at(), bytes.len() as u64);
        }
    }
}
