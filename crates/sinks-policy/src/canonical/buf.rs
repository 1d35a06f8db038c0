//! The output of the streaming canonical writers ([`super::ser`], [`super::text`]): canonical
//! JSON written as it comes, objects put in key order as they close.
//!
//! Members are written as they come, each remembered as a span of the output with its decoded
//! key; an object whose keys did not come in ascending order is put in order when it closes, by
//! moving its spans (most documents come sorted, and only an object that was not is moved). A
//! key given twice keeps its last value, as a [`serde_json::Value`] does, or (for text read
//! strictly) refuses the document.

/// Where a key's decoded text is: in the output (a key with nothing to escape is written as it
/// is) or in the key arena (a key that was escaped).
#[derive(Debug, Clone, Copy, Default)]
struct KeyRef {
    start: usize,
    end: usize,
    in_arena: bool,
}

/// One member of an open object: its key and where it sits in the output, from its key's
/// opening quote to the end of its value (a comma before it is not part of it).
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: KeyRef,
    start: usize,
    end: usize,
}

/// An open array or object.
#[derive(Debug, Clone, Copy)]
struct Frame {
    object: bool,
    /// The paths left out (bits: indexes into [`Omit`]'s paths) that lead into this object:
    /// those that end at one of its keys, and those that go on through one.
    ends_here: u64,
    goes_through: u64,
    /// Keys came in strictly ascending order so far.
    sorted: bool,
    /// Members or items written so far.
    count: usize,
    /// Where this object's members start in the entry stack and in the key arena.
    entries: usize,
    keys: usize,
    /// The output position just after the `{`.
    body: usize,
    /// The member being written: its key, where it starts (after its comma) and where the
    /// output stood before its comma (to take it back when it is left out).
    key: KeyRef,
    start: usize,
    mark: usize,
}

/// What a repeated key does to a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Repeats {
    /// The last value stays (a [`serde_json::Value`] map).
    KeepLast,
    /// The document is refused (strict JSON).
    Refuse,
}

/// A reusable buffer of canonical JSON: the output and the state of the objects open in it
/// (what the streaming writers write into; no destination, whatever a caller names it).
#[derive(Debug, Default)]
pub struct CanonicalBuf {
    pub(super) out: Vec<u8>,
    keys: Vec<u8>,
    entries: Vec<Entry>,
    frames: Vec<Frame>,
    scratch: Vec<u8>,
}

/// A repeated key in a document read strictly.
#[derive(Debug)]
pub(super) struct Repeated;

/// Paths of members to leave out (keys from the root, through objects only). Each open object
/// knows which paths lead into it, so a key is compared only with the last keys of the paths
/// that end in its object (at most [`Omit::MAX_PATHS`] paths: more go the value route).
#[derive(Debug, Clone, Copy)]
pub(super) struct Omit<'p> {
    paths: &'p [&'p [&'p str]],
}

impl<'p> Omit<'p> {
    /// The most paths one writer follows (a bit each).
    pub(super) const MAX_PATHS: usize = 64;

    pub(super) fn new(paths: &'p [&'p [&'p str]]) -> Self {
        Self { paths }
    }

    /// The paths among `candidates` whose key at `depth` is `key`.
    fn narrow(&self, candidates: u64, depth: usize, key: &[u8]) -> u64 {
        let mut narrowed = 0;
        for i in bits(candidates) {
            if self.paths.get(i).and_then(|path| path.get(depth)).is_some_and(|k| k.as_bytes() == key) {
                narrowed |= 1 << i;
            }
        }
        narrowed
    }

    /// The paths among `candidates` longer than `depth`, split into those that end at `depth`
    /// and those that go deeper.
    fn split(&self, candidates: u64, depth: usize) -> (u64, u64) {
        let (mut ends, mut through) = (0, 0);
        for i in bits(candidates) {
            match self.paths.get(i).map_or(0, |path| path.len()).cmp(&(depth + 1)) {
                std::cmp::Ordering::Equal => ends |= 1 << i,
                std::cmp::Ordering::Greater => through |= 1 << i,
                std::cmp::Ordering::Less => {}
            }
        }
        (ends, through)
    }
}

/// The indexes of the bits set in `set`, lowest first.
fn bits(mut set: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (set != 0).then(|| {
            let i = set.trailing_zeros() as usize;
            set &= set - 1;
            i
        })
    })
}

/// The set of the first `n` paths (at most 64).
fn every_path(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// `a < b` in byte order, compared eight bytes at a time in line (keys are short and often
/// share a prefix, such as the `Nats-` of header names, where a call to `memcmp` per member
/// cost more than the comparison).
fn ascending(a: &[u8], b: &[u8]) -> bool {
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let x = u64::from_be_bytes(<[u8; 8]>::try_from(x).unwrap_or_default());
        let y = u64::from_be_bytes(<[u8; 8]>::try_from(y).unwrap_or_default());
        if x != y {
            return x < y;
        }
    }
    // The common whole words are equal: compare what is left of each.
    let done = a.len().min(b.len()) / 8 * 8;
    let (a_rest, b_rest) = (&a[done..], &b[done..]);
    for (x, y) in a_rest.iter().zip(b_rest) {
        if x != y {
            return x < y;
        }
    }
    a_rest.len() < b_rest.len()
}

impl CanonicalBuf {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The canonical bytes written since the last [`CanonicalBuf::clear`].
    pub fn bytes(&self) -> &[u8] {
        &self.out
    }

    /// The memory held, in bytes of output and scratch space.
    pub fn capacity(&self) -> usize {
        self.out.capacity() + self.scratch.capacity()
    }

    /// Forgets what was written (keeping the memory).
    pub fn clear(&mut self) {
        self.out.clear();
        self.keys.clear();
        self.entries.clear();
        self.frames.clear();
    }

    fn top(&mut self) -> &mut Frame {
        // Every caller is inside an open array or object.
        let last = self.frames.len() - 1;
        &mut self.frames[last]
    }

    fn key_text(&self, key: KeyRef) -> &[u8] {
        if key.in_arena { &self.keys[key.start..key.end] } else { &self.out[key.start..key.end] }
    }

    /// Opens an array (`object` false) or an object. An object's keys are checked against
    /// the paths of `omit` that lead there.
    pub(super) fn begin(&mut self, object: bool, omit: Option<&Omit<'_>>) {
        let (ends_here, goes_through) = match (object, omit, self.frames.last()) {
            (true, Some(omit), None) => omit.split(every_path(omit.paths.len()), 0),
            (true, Some(omit), Some(parent)) if parent.object && parent.goes_through != 0 => {
                let depth = self.frames.len();
                omit.split(omit.narrow(parent.goes_through, depth - 1, self.key_text(parent.key)), depth)
            }
            _ => (0, 0),
        };
        self.out.push(if object { b'{' } else { b'[' });
        let (entries, keys, body) = (self.entries.len(), self.keys.len(), self.out.len());
        self.frames.push(Frame {
            object,
            ends_here,
            goes_through,
            sorted: true,
            count: 0,
            entries,
            keys,
            body,
            key: KeyRef::default(),
            start: body,
            mark: body,
        });
    }

    pub(super) fn item(&mut self) {
        let frame = self.top();
        frame.count += 1;
        if frame.count > 1 {
            self.out.push(b',');
        }
    }

    pub(super) fn end_array(&mut self) {
        self.frames.pop();
        self.out.push(b']');
    }

    /// A member's key: its comma, then the key, quoted and escaped, then the colon.
    pub(super) fn key(&mut self, key: &str) {
        self.out.reserve(key.len() + 4);
        let mark = self.out.len();
        let comma = self.top().count > 0;
        if comma {
            self.out.push(b',');
        }
        let start = self.out.len();
        self.out.push(b'"');
        let escaped = escape_into(key, &mut self.out);
        let key = if escaped {
            let at = self.keys.len();
            self.keys.extend_from_slice(key.as_bytes());
            KeyRef { start: at, end: self.keys.len(), in_arena: true }
        } else {
            KeyRef { start: start + 1, end: self.out.len(), in_arena: false }
        };
        self.out.extend_from_slice(b"\":");
        let frame = self.top();
        frame.mark = mark;
        frame.start = start;
        frame.key = key;
    }

    /// The member just written is complete.
    pub(super) fn end_member(&mut self) {
        let end = self.out.len();
        let last = self.frames.len() - 1;
        let (sorted, count, key, start) = {
            let frame = &self.frames[last];
            (frame.sorted, frame.count, frame.key, frame.start)
        };
        if sorted && count > 0 {
            let previous = self.entries[self.entries.len() - 1].key;
            if !ascending(self.key_text(previous), self.key_text(key)) {
                self.frames[last].sorted = false;
            }
        }
        self.frames[last].count += 1;
        self.entries.push(Entry { key, start, end });
    }

    /// Takes back the member being written (left out by path).
    pub(super) fn drop_member(&mut self) {
        let Frame { mark, key, .. } = *self.top();
        self.out.truncate(mark);
        if key.in_arena {
            self.keys.truncate(key.start);
        }
    }

    /// Closes an object, putting its members in key order if they did not come in it.
    pub(super) fn end_object(&mut self, repeats: Repeats) -> Result<(), Repeated> {
        let Some(frame) = self.frames.pop() else { return Ok(()) };
        if !frame.sorted {
            let (keys, out) = (&self.keys, &self.out);
            let text = |k: KeyRef| if k.in_arena { &keys[k.start..k.end] } else { &out[k.start..k.end] };
            let members = &mut self.entries[frame.entries..];
            // Stable: of equal keys, the last written stays last.
            members.sort_by(|a, b| text(a.key).cmp(text(b.key)));
            self.scratch.clear();
            self.scratch.extend_from_slice(&out[frame.body..]);
            let mut kept = Vec::with_capacity(members.len());
            for (i, member) in members.iter().enumerate() {
                let repeated = members.get(i + 1).is_some_and(|next| text(next.key) == text(member.key));
                if !repeated {
                    kept.push((member.start - frame.body, member.end - frame.body));
                } else if repeats == Repeats::Refuse {
                    return Err(Repeated);
                }
            }
            self.out.truncate(frame.body);
            for (i, (start, end)) in kept.into_iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                self.out.extend_from_slice(&self.scratch[start..end]);
            }
        }
        self.entries.truncate(frame.entries);
        self.keys.truncate(frame.keys);
        self.out.push(b'}');
        Ok(())
    }

    /// The path of the key just written is one of `omit`'s.
    #[inline]
    pub(super) fn key_is_omitted(&self, omit: &Omit<'_>) -> bool {
        match self.frames.last() {
            Some(top) if top.ends_here != 0 => self.key_ends_a_path(omit),
            _ => false,
        }
    }

    fn key_ends_a_path(&self, omit: &Omit<'_>) -> bool {
        let Some(top) = self.frames.last() else { return false };
        let key = self.key_text(top.key);
        let depth = self.frames.len() - 1;
        bits(top.ends_here)
            .any(|i| omit.paths.get(i).and_then(|path| path.get(depth)).is_some_and(|k| k.as_bytes() == key))
    }

    /// A string value, quoted and escaped.
    pub(crate) fn string(&mut self, s: &str) {
        self.out.push(b'"');
        escape_into(s, &mut self.out);
        self.out.push(b'"');
    }
}

/// Documents whose members are fixed, written in key order by their own writers outside the
/// tracking of objects, spelled canonically: the metadata document
/// ([`sinks_toolkit::metadata::MetadataDoc::write_in_key_order`], the custody metadata hash's
/// input) and custody's record material. Each part is written as the serde route writes it
/// (`Out`).
impl sinks_toolkit::metadata::DocWriter for CanonicalBuf {
    type Error = super::CanonicalError;

    fn raw(&mut self, bytes: &[u8]) {
        Out::raw(self, bytes);
    }

    fn string(&mut self, text: &str) {
        Out::string(self, text);
    }

    fn integer(&mut self, value: i64) {
        Out::integer(self, value);
    }

    fn unsigned(&mut self, value: u64) {
        Out::integer(self, value);
    }

    fn float(&mut self, value: f64) {
        // Only a non-finite float is refused, and the document never hands one over; were it
        // to, `null` is what the value route would write.
        if Out::float(self, value).is_err() {
            Out::raw(self, b"null");
        }
    }

    fn value(&mut self, value: &serde_json::Value) -> Result<(), Self::Error> {
        super::write(value, &mut self.out)
    }

    /// A document a policy step attached is written as its canonical text (made by this
    /// module's writer: the same bytes as writing its value).
    fn doc(&mut self, doc: &sinks_contract::json::JsonDoc) -> Result<(), Self::Error> {
        match doc.canonical() {
            Some(text) => {
                Out::raw(self, text.as_bytes());
                Ok(())
            }
            None => self.value(doc.value()),
        }
    }
}

/// The escape of each byte: 0 for none, else the letter after the backslash (`u` for
/// `\u00XX`). Only `"`, `\` and the ASCII controls are escaped, as `json.dumps` with
/// `ensure_ascii=False` does; no byte of a multi-byte UTF-8 sequence is ASCII, so runs of other
/// bytes are copied as they are.
pub(super) static ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The contents of a string (no quotes), escaped; true when anything was. A string with nothing
/// to escape (most of any document) is checked without branching on each byte, then copied in
/// one go.
#[inline]
pub(super) fn escape_into(s: &str, out: &mut Vec<u8>) -> bool {
    let bytes = s.as_bytes();
    if needs_escape(bytes) {
        escape_each(bytes, out);
        true
    } else {
        out.extend_from_slice(bytes);
        false
    }
}

/// [`escape_into`] for a string with something to escape: the runs between escapes copied in
/// one go each, every escape written as its two or six bytes (more instructions than pushing
/// byte by byte on quote-dense text such as JSON in a header, but faster by the clock: fewer
/// capacity checks on the way).
#[inline(never)]
fn escape_each(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 8);
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape = ESCAPES[usize::from(b)];
        if escape != 0 {
            out.extend_from_slice(&bytes[run..i]);
            push_escape(escape, b, out);
            run = i + 1;
        }
    }
    out.extend_from_slice(&bytes[run..]);
}

/// True when a byte of `bytes` is below 0x20, `"` or `\\`, looked at eight bytes at a time: the
/// whole words, then the last eight bytes (overlapping the words already looked at; a string
/// shorter than a word is padded with a byte that needs no escape).
#[inline]
fn needs_escape(bytes: &[u8]) -> bool {
    let word = |at: &[u8]| <[u8; 8]>::try_from(at).unwrap_or([b'a'; 8]);
    if bytes.len() < 8 {
        let mut padded = [b'a'; 8];
        padded[..bytes.len()].copy_from_slice(bytes);
        return word_needs_escape(padded);
    }
    let words = bytes.chunks_exact(8);
    let last = &bytes[bytes.len() - 8..];
    words.map(word).chain(std::iter::once(word(last))).any(word_needs_escape)
}

/// True when one of the eight bytes is below 0x20, `"` or `\\` (the classic "has a zero byte" and
/// "has a byte below n" tests, exact for the question whether there is one).
#[inline]
fn word_needs_escape(bytes: [u8; 8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = u64::from_le_bytes(bytes);
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    below | zero_in(word ^ (ONES * u64::from(b'"'))) | zero_in(word ^ (ONES * u64::from(b'\\'))) != 0
}

pub(super) fn push_escape(escape: u8, b: u8, out: &mut Vec<u8>) {
    if escape == b'u' {
        out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
    } else {
        out.extend_from_slice(&[b'\\', escape]);
    }
}

/// Appends the decimal digits of `value`.
pub(super) fn push_integer(value: impl Into<i128>, out: &mut Vec<u8>) {
    let value: i128 = value.into();
    if value < 0 {
        out.push(b'-');
    }
    let magnitude = value.unsigned_abs();
    match u64::try_from(magnitude) {
        Ok(small) => push_digits(small, out),
        Err(_) => out.extend_from_slice(magnitude.to_string().as_bytes()),
    }
}

fn push_digits(mut n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        // `n % 10` is below 10.
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Where [`super::ser`] writes: the canonical bytes ([`CanonicalBuf`]) or only their length
/// ([`Counter`]).
pub(super) trait Out {
    /// Bytes written as they are (`null`, `true`, digits).
    fn raw(&mut self, bytes: &[u8]);
    /// An integer in decimal.
    fn integer(&mut self, value: impl Into<i128>);
    /// A finite float as Python prints it.
    fn float(&mut self, value: f64) -> Result<(), super::CanonicalError>;
    /// A string value, quoted and escaped.
    fn string(&mut self, s: &str);
    /// Opens an array or an object (see [`CanonicalBuf::begin`]).
    fn begin(&mut self, object: bool, omit: Option<&Omit<'_>>);
    /// Starts an array item.
    fn item(&mut self);
    /// Closes an array.
    fn end_array(&mut self);
    /// A member's comma, key and colon.
    fn key(&mut self, key: &str);
    /// The key just written is on a path left out.
    fn key_is_omitted(&self, omit: &Omit<'_>) -> bool;
    /// Takes back the member just begun.
    fn drop_member(&mut self);
    /// The member just written is complete.
    fn end_member(&mut self);
    /// Closes an object.
    fn end_object(&mut self, repeats: Repeats) -> Result<(), Repeated>;
}

impl Out for CanonicalBuf {
    #[inline]
    fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
    #[inline]
    fn integer(&mut self, value: impl Into<i128>) {
        push_integer(value, &mut self.out);
    }
    #[inline]
    fn float(&mut self, value: f64) -> Result<(), super::CanonicalError> {
        super::write_python_float(value, &mut self.out)
    }
    #[inline]
    fn string(&mut self, s: &str) {
        Self::string(self, s);
    }
    #[inline]
    fn begin(&mut self, object: bool, omit: Option<&Omit<'_>>) {
        Self::begin(self, object, omit);
    }
    #[inline]
    fn item(&mut self) {
        Self::item(self);
    }
    #[inline]
    fn end_array(&mut self) {
        Self::end_array(self);
    }
    #[inline]
    fn key(&mut self, key: &str) {
        Self::key(self, key);
    }
    #[inline]
    fn key_is_omitted(&self, omit: &Omit<'_>) -> bool {
        Self::key_is_omitted(self, omit)
    }
    #[inline]
    fn drop_member(&mut self) {
        Self::drop_member(self);
    }
    #[inline]
    fn end_member(&mut self) {
        Self::end_member(self);
    }
    #[inline]
    fn end_object(&mut self, repeats: Repeats) -> Result<(), Repeated> {
        Self::end_object(self, repeats)
    }
}

/// The length of the canonical bytes, counted without writing them. Objects are not sorted
/// (a length does not depend on the order) and no member is left out.
#[derive(Debug, Default)]
pub(super) struct Counter {
    len: u64,
    /// Items or members written in each open array or object.
    counts: Vec<u64>,
    scratch: Vec<u8>,
}

impl Counter {
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    fn comma(&mut self) {
        if let Some(count) = self.counts.last_mut() {
            if *count > 0 {
                self.len += 1;
            }
            *count += 1;
        }
    }
}

/// The metadata document's length, counted as its own writer writes it
/// ([`super::metadata_len`]).
impl sinks_toolkit::metadata::DocWriter for Counter {
    type Error = std::convert::Infallible;

    fn raw(&mut self, bytes: &[u8]) {
        Out::raw(self, bytes);
    }

    fn string(&mut self, text: &str) {
        Out::string(self, text);
    }

    fn integer(&mut self, value: i64) {
        Out::integer(self, value);
    }

    fn unsigned(&mut self, value: u64) {
        Out::integer(self, value);
    }

    fn float(&mut self, value: f64) {
        // As the canonical writer: a non-finite float (never handed over) would be `null`.
        if Out::float(self, value).is_err() {
            self.len += 4;
        }
    }

    fn value(&mut self, value: &serde_json::Value) -> Result<(), Self::Error> {
        self.len += super::len_of(value);
        Ok(())
    }

    /// A document a policy step attached counts as its canonical text's length.
    fn doc(&mut self, doc: &sinks_contract::json::JsonDoc) -> Result<(), Self::Error> {
        self.len += super::doc_len(doc);
        Ok(())
    }
}

/// The length of `s` escaped (no quotes).
fn escaped_len(s: &str) -> u64 {
    let bytes = s.as_bytes();
    if !needs_escape(bytes) {
        return bytes.len() as u64;
    }
    bytes
        .iter()
        .map(|&b| match ESCAPES[usize::from(b)] {
            0 => 1,
            b'u' => 6,
            _ => 2,
        })
        .sum()
}

impl Out for Counter {
    fn raw(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
    }
    fn integer(&mut self, value: impl Into<i128>) {
        let value: i128 = value.into();
        let digits = value.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
        self.len += u64::from(digits) + u64::from(value < 0);
    }
    fn float(&mut self, value: f64) -> Result<(), super::CanonicalError> {
        self.scratch.clear();
        super::write_python_float(value, &mut self.scratch)?;
        self.len += self.scratch.len() as u64;
        Ok(())
    }
    fn string(&mut self, s: &str) {
        self.len += 2 + escaped_len(s);
    }
    fn begin(&mut self, _: bool, _: Option<&Omit<'_>>) {
        self.len += 1;
        self.counts.push(0);
    }
    fn item(&mut self) {
        self.comma();
    }
    fn end_array(&mut self) {
        self.counts.pop();
        self.len += 1;
    }
    fn key(&mut self, key: &str) {
        self.comma();
        self.len += 3 + escaped_len(key);
    }
    fn key_is_omitted(&self, _: &Omit<'_>) -> bool {
        false
    }
    fn drop_member(&mut self) {}
    fn end_member(&mut self) {}
    fn end_object(&mut self, _: Repeats) -> Result<(), Repeated> {
        self.counts.pop();
        self.len += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::ascending;

    /// Bytes from a small alphabet, so that long common prefixes are frequent.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(vec![b'N', b'a', b'-', 0u8, 0xff, b'z']), 0..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        #[test]
        fn word_wise_order_is_byte_order(a in key(), b in key(), prefix in key()) {
            let (a, b) = ([&prefix[..], &a[..]].concat(), [&prefix[..], &b[..]].concat());
            prop_assert_eq!(ascending(&a, &b), a < b);
        }
    }
}
