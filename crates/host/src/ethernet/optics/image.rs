//! The memory image a dump describes, and the readers of the text forms of a
//! dump (ethtool's hex dump, sfputil's and hexdump -C's per-page rows).

use super::{BadChecksum, OpticsError, A2, IMAGE_LEN, MAX_ROW, PAGE};

/// A sparse copy of module memory in the flat layout.
pub(super) struct Image {
    bytes: Vec<u8>,
    present: Vec<bool>,
}

impl Image {
    fn new() -> Image {
        Image {
            bytes: vec![0; IMAGE_LEN],
            present: vec![false; IMAGE_LEN],
        }
    }

    pub(super) fn from_raw(raw: &[u8]) -> Image {
        let mut img = Image::new();
        for (addr, &b) in raw.iter().take(IMAGE_LEN).enumerate() {
            img.set(addr, b);
        }
        img
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.present.iter().any(|&p| p)
    }

    fn set(&mut self, addr: usize, b: u8) {
        if let (Some(slot), Some(p)) = (self.bytes.get_mut(addr), self.present.get_mut(addr)) {
            *slot = b;
            *p = true;
        }
    }

    pub(super) fn byte(&self, addr: usize) -> Option<u8> {
        match self.present.get(addr) {
            Some(true) => self.bytes.get(addr).copied(),
            _ => None,
        }
    }

    pub(super) fn u16(&self, addr: usize) -> Option<u16> {
        Some(u16::from_be_bytes([self.byte(addr)?, self.byte(addr + 1)?]))
    }

    pub(super) fn i16(&self, addr: usize) -> Option<i16> {
        Some(i16::from_be_bytes([self.byte(addr)?, self.byte(addr + 1)?]))
    }

    /// The first absent address in `range`, if any.
    pub(super) fn first_absent(&self, range: std::ops::Range<usize>) -> Option<usize> {
        range.into_iter().find(|&a| self.byte(a).is_none())
    }

    pub(super) fn has(&self, range: std::ops::Range<usize>) -> bool {
        self.first_absent(range).is_none()
    }

    /// Printable ASCII of `range`, trailing spaces and NULs removed, other
    /// bytes (and absent ones) as `_`.
    pub(super) fn ascii(&self, range: std::ops::Range<usize>) -> String {
        let mut bytes: Vec<Option<u8>> = range.map(|a| self.byte(a)).collect();
        // Fields are padded with spaces; some modules pad with NULs.
        while matches!(bytes.last(), Some(Some(b' ' | 0))) {
            bytes.pop();
        }
        bytes
            .into_iter()
            .map(|b| match b {
                Some(b @ 0x20..=0x7e) => b as char,
                _ => '_',
            })
            .collect()
    }

    /// The check code at `at` over `range`, when it does not match.
    pub(super) fn checksum(
        &self,
        name: &str,
        range: std::ops::Range<usize>,
        at: usize,
    ) -> Option<BadChecksum> {
        let stored = self.byte(at)?;
        let mut sum = 0u8;
        for a in range {
            sum = sum.wrapping_add(self.byte(a)?);
        }
        (sum != stored).then(|| BadChecksum {
            name: name.to_string(),
            at,
            stored,
            computed: sum,
        })
    }
}

/// Flat address of byte `offset` (128..=255) of upper page `page`.
pub(super) fn upper(page: u8, offset: usize) -> usize {
    PAGE * (page as usize + 1) + offset.saturating_sub(PAGE)
}

/// Where the rows of the current section go.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Section {
    /// Offsets are flat addresses.
    Flat,
    /// `Lower page`: offsets 0-127 of the lower page.
    Lower,
    /// `Upper page N`: offsets 128-255 (or 0-127, page-relative) of page N.
    Upper(u8),
    /// A command for page N: offsets below 128 are the lower page, the rest page N.
    PageOf(u8),
    /// I2C address 0x51: SFF-8472 A2h, offsets 0-255.
    A2,
    /// A bank other than 0: rows are not kept.
    Skip,
}

struct Row {
    offset: usize,
    bytes: Vec<u8>,
}

impl Image {
    pub(super) fn from_text(text: &str) -> Result<Image, OpticsError> {
        let mut img = Image::new();
        let mut section = Section::Flat;
        // A hexdump -C `*`: the previous row repeats until the next offset.
        let mut last: Option<Row> = None;
        let mut repeat = false;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if line.is_empty() {
                continue;
            }
            if line == "*" {
                repeat = last.is_some();
                continue;
            }
            match hex_row(line, line_no)? {
                RowKind::Row(row) => {
                    if repeat {
                        if let Some(prev) = &last {
                            img.repeat(prev, row.offset, section, line_no)?;
                        }
                        repeat = false;
                    }
                    img.place(&row, section, line_no)?;
                    last = Some(row);
                }
                RowKind::End(offset) => {
                    if repeat {
                        if let Some(prev) = &last {
                            img.repeat(prev, offset, section, line_no)?;
                        }
                        repeat = false;
                    }
                }
                RowKind::Other => {
                    if let Some(s) = section_header(line) {
                        section = s;
                        last = None;
                        repeat = false;
                    }
                }
            }
        }
        Ok(img)
    }

    fn place(&mut self, row: &Row, section: Section, line: usize) -> Result<(), OpticsError> {
        for (k, &b) in row.bytes.iter().enumerate() {
            let off = row.offset + k;
            let addr = match section {
                Section::Skip => return Ok(()),
                Section::Flat | Section::Lower => off,
                Section::A2 if off < 256 => A2 + off,
                Section::Upper(p) if off < PAGE => PAGE * (p as usize + 1) + off,
                Section::Upper(p) | Section::PageOf(p) if (PAGE..2 * PAGE).contains(&off) => {
                    upper(p, off)
                }
                Section::PageOf(_) if off < PAGE => off,
                _ => {
                    return Err(OpticsError::BadLine {
                        line,
                        text: format!("offset {off:#06x}"),
                        reason: "offset beyond the page its section names",
                    })
                }
            };
            if addr >= IMAGE_LEN {
                return Err(OpticsError::OffsetOutOfRange { line, offset: addr });
            }
            self.set(addr, b);
        }
        Ok(())
    }

    fn repeat(
        &mut self,
        prev: &Row,
        until: usize,
        section: Section,
        line: usize,
    ) -> Result<(), OpticsError> {
        let step = prev.bytes.len().max(1);
        let mut offset = prev.offset + step;
        while offset < until && offset < IMAGE_LEN {
            let row = Row {
                offset,
                bytes: prev.bytes.clone(),
            };
            self.place(&row, section, line)?;
            offset += step;
        }
        Ok(())
    }
}

enum RowKind {
    Row(Row),
    /// hexdump's closing line: an offset alone.
    End(usize),
    Other,
}

/// Reads `0x0080:  11 8c ..` (ethtool) or `00000080 11 8c .. |..|` (hexdump -C).
fn hex_row(line: &str, line_no: usize) -> Result<RowKind, OpticsError> {
    let mut tokens = line.split_whitespace();
    let Some(first) = tokens.next() else {
        return Ok(RowKind::Other);
    };
    let bad = |reason: &'static str| OpticsError::BadLine {
        line: line_no,
        text: cut(line),
        reason,
    };
    let (digits, ethtool) = match first
        .strip_prefix("0x")
        .or_else(|| first.strip_prefix("0X"))
    {
        Some(rest) => match rest.strip_suffix(':') {
            Some(d) => (d, true),
            None => return Ok(RowKind::Other),
        },
        None => (first.strip_suffix(':').unwrap_or(first), false),
    };
    let is_offset =
        (1..=8).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_offset || (!ethtool && digits.len() < 4) {
        return Ok(RowKind::Other);
    }
    let offset = usize::from_str_radix(digits, 16).map_err(|_| bad("offset is not hexadecimal"))?;
    let rest: Vec<&str> = tokens.take_while(|t| !t.starts_with('|')).collect();
    if rest.is_empty() {
        return if ethtool {
            Err(bad("row has no bytes"))
        } else {
            Ok(RowKind::End(offset))
        };
    }
    if !ethtool && !is_byte(rest[0]) {
        // A line that merely starts with a number ("2024 ...") is not a row.
        return Ok(RowKind::Other);
    }
    if rest.len() > MAX_ROW {
        return Err(bad("row has more bytes than a dump row holds"));
    }
    let mut bytes = Vec::with_capacity(rest.len());
    for t in rest {
        if !is_byte(t) {
            return Err(bad("byte is not two hex digits"));
        }
        bytes.push(u8::from_str_radix(t, 16).map_err(|_| bad("byte is not two hex digits"))?);
    }
    if offset >= IMAGE_LEN {
        return Err(OpticsError::OffsetOutOfRange {
            line: line_no,
            offset,
        });
    }
    Ok(RowKind::Row(Row { offset, bytes }))
}

fn is_byte(t: &str) -> bool {
    t.len() == 2 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A line that names the page of the rows after it, if this one does.
fn section_header(line: &str) -> Option<Section> {
    let lower = line.to_ascii_lowercase();
    let tokens: Vec<&str> = lower.split_whitespace().collect();
    let after = |word: &str| -> Option<&str> {
        let i = tokens.iter().position(|t| *t == word)?;
        tokens.get(i + 1).copied()
    };
    if let Some(bank) = after("bank").and_then(number) {
        if bank != 0 {
            return Some(Section::Skip);
        }
    }
    if after("i2c").and_then(number) == Some(0x51) || tokens.contains(&"a2h") {
        return Some(Section::A2);
    }
    let page = after("page").and_then(number);
    if tokens.contains(&"lower") && page.is_some() {
        return Some(Section::Lower);
    }
    if tokens.contains(&"upper") {
        return page.and_then(|p| u8::try_from(p).ok()).map(Section::Upper);
    }
    if let Some(p) = page {
        return u8::try_from(p).ok().map(Section::PageOf);
    }
    // A plain dump command starts a flat dump.
    let command = tokens.contains(&"ethtool")
        && tokens
            .iter()
            .any(|t| matches!(*t, "-m" | "--dump-module-eeprom" | "--module-info"));
    command.then_some(Section::Flat)
}

/// `3`, `0x11`, `11h`, `0x11h`.
fn number(t: &str) -> Option<u32> {
    let t = t.trim_end_matches([',', ':', ')']);
    let (t, hex_suffix) = match t.strip_suffix('h') {
        Some(s) => (s, true),
        None => (t, false),
    };
    if let Some(h) = t.strip_prefix("0x") {
        u32::from_str_radix(h, 16).ok()
    } else if hex_suffix {
        u32::from_str_radix(t, 16).ok()
    } else {
        t.parse().ok()
    }
}

fn cut(line: &str) -> String {
    line.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_offsets_of_upper_pages() {
        assert_eq!(upper(0, 0x80), 0x80);
        assert_eq!(upper(3, 0x80), 0x200);
        assert_eq!(upper(0x11, 0x9a), 0x900 + 0x1a);
    }

    #[test]
    fn page_numbers_in_headers() {
        assert_eq!(number("0x11h"), Some(0x11));
        assert_eq!(number("11h"), Some(0x11));
        assert_eq!(number("0h"), Some(0));
        assert_eq!(number("3"), Some(3));
        assert_eq!(number("x"), None);
        assert_eq!(
            section_header("Upper page 0x11h"),
            Some(Section::Upper(0x11))
        );
        assert_eq!(section_header("Lower page 0h"), Some(Section::Lower));
        assert_eq!(
            section_header("# ethtool -m eth0 page 3 hex on"),
            Some(Section::PageOf(3))
        );
        assert_eq!(
            section_header("# ethtool -m eth0 i2c 0x51 hex on"),
            Some(Section::A2)
        );
        assert_eq!(
            section_header("$ ethtool -m eth0 hex on"),
            Some(Section::Flat)
        );
        assert_eq!(
            section_header("ethtool -m eth0 page 0x10 bank 1 hex on"),
            Some(Section::Skip)
        );
        assert_eq!(section_header("Offset\t\tValues"), None);
    }

    #[test]
    fn a_netlink_page_dump_lands_on_its_page() {
        let mut text =
            String::from("# ethtool -m swp1 hex on\nOffset\t\tValues\n------\t\t------\n");
        for row in 0..16 {
            text += &format!("0x{:04x}:\t\t", row * 16);
            for col in 0..16 {
                text += if row == 0 && col == 0 { "11 " } else { "00 " };
            }
            text += "\n";
        }
        text += "# ethtool -m swp1 page 3 hex on\nOffset\t\tValues\n------\t\t------\n0x0080:\t\t00 50\n";
        let img = Image::from_text(&text).unwrap();
        assert_eq!(img.byte(0), Some(0x11));
        assert_eq!(img.byte(0x201), Some(0x50));
        assert_eq!(img.byte(0x81), Some(0x00));
    }

    #[test]
    fn hexdump_star_repeats_the_previous_row() {
        let text = "00000000  03 04 07 10 00 00 00 00  00 00 00 06 67 00 00 00  |............g...|\n\
                    00000010  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n\
                    *\n\
                    00000060  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n\
                    00000070\n";
        let img = Image::from_text(text).unwrap();
        assert!(img.has(0..0x70));
        assert!(!img.has(0..0x71));
    }
}
