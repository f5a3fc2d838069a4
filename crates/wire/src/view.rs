//! What every header module shares: the `Packet<T>` view type (declared by
//! [`view!`]) and the big-endian field accessors the views read and write
//! with. Callers index inside a buffer whose length `check_len` verified.

/// Declares the module's `Packet<T>`: a read/write view over a byte buffer,
/// with `new_unchecked`, `new_checked` and `into_inner`. Given the header's
/// length and how to say it, also the `check_len` of a fixed-size header;
/// otherwise the module writes `check_len` itself (length fields, options).
macro_rules! view {
    ($art:ident $what:literal) => {
        #[doc = concat!("A read/write wrapper around ", stringify!($art), " ", $what, " buffer.")]
        #[derive(Debug, Clone)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            #[doc = concat!("Imbue a raw octet buffer with ", $what, " structure.")]
            pub const fn new_unchecked(buffer: T) -> Packet<T> {
                Packet { buffer }
            }

            /// [`Packet::new_unchecked`] followed by [`Packet::check_len`].
            pub fn new_checked(buffer: T) -> $crate::Result<Packet<T>> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Consume the packet, returning the underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
    ($art:ident $what:literal, $len:expr, $shorter:expr) => {
        $crate::view::view!($art $what);

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Ensure that no accessor method will panic if called.
            ///
            /// # Errors
            #[doc = concat!("[`crate::Error::Truncated`] if the buffer is shorter than ", $shorter, ".")]
            pub fn check_len(&self) -> $crate::Result<()> {
                $crate::view::len_at_least(self.buffer.as_ref(), $len).map(|_| ())
            }
        }
    };
}
pub(crate) use view;

/// The length of `b`, which must hold at least the `fixed` bytes of a
/// header's fixed part: the first test of every `check_len`.
///
/// # Errors
/// [`crate::Error::Truncated`] when `b` is shorter.
pub(crate) fn len_at_least(b: &[u8], fixed: usize) -> crate::Result<usize> {
    if b.len() < fixed {
        Err(crate::Error::Truncated)
    } else {
        Ok(b.len())
    }
}

/// The big-endian u16 at `off`.
pub(crate) fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}
/// The big-endian 24-bit value at `off` (3 bytes).
pub(crate) fn get_u24(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}
/// The big-endian u32 at `off`.
pub(crate) fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
/// The big-endian u64 at `off`.
pub(crate) fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(x)
}
/// `width` bits of byte `off` starting at spec bit `bit` (0 = most significant).
pub(crate) fn get_bits(b: &[u8], off: usize, bit: u32, width: u32) -> u8 {
    let shift = 8 - bit - width;
    (b[off] >> shift) & ((1u16 << width) - 1) as u8
}
/// Writes `v` big-endian at `off`.
pub(crate) fn set_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}
/// Writes the low 24 bits of `v` big-endian at `off` (3 bytes).
pub(crate) fn set_u24(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
/// Writes `v` big-endian at `off`.
pub(crate) fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}
/// Writes `v` big-endian at `off`.
pub(crate) fn set_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}
/// Sets `width` bits of byte `off` starting at spec bit `bit`.
pub(crate) fn set_bits(b: &mut [u8], off: usize, bit: u32, width: u32, v: u8) {
    let shift = 8 - bit - width;
    let mask = (((1u16 << width) - 1) as u8) << shift;
    b[off] = (b[off] & !mask) | ((v << shift) & mask);
}

/// Declares a fixed-layout header or message from its table of fields: the
/// view (see [`view!`]) with one getter and setter per field, its place and
/// width given by the field's [`Codec`] type, byte arrays (ARI, private data)
/// with `..._mut` accessors, and a `Repr` that parses and emits them all in
/// the table's order. The module writes its `Display`.
macro_rules! layout {
    (
        $art:ident $what:literal, $len:expr, $shorter:expr;
        fields { $( $(#[doc = $doc:literal])* $get:ident / $set:ident : $ty:ty = $codec:ty; )* }
        $( bytes { $( $(#[doc = $bdoc:literal])* $bget:ident / $bmut:ident : [$boff:expr; $blen:expr]; )+ } )?
    ) => {
        $crate::view::view!($art $what, $len, $shorter);

        impl<T: AsRef<[u8]>> Packet<T> {
            $(
                $(#[doc = $doc])*
                pub fn $get(&self) -> $ty {
                    <$codec as $crate::view::Codec<$ty>>::get(self.buffer.as_ref())
                }
            )*
            $($(
                $(#[doc = $bdoc])*
                pub fn $bget(&self) -> &[u8] {
                    &self.buffer.as_ref()[$boff..$boff + $blen]
                }
            )+)?
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $(
                #[doc = concat!("Sets: ", $($doc),*)]
                pub fn $set(&mut self, v: $ty) {
                    <$codec as $crate::view::Codec<$ty>>::set(self.buffer.as_mut(), v)
                }
            )*
            $($(
                #[doc = concat!($($bdoc),*, " Mutable.")]
                pub fn $bmut(&mut self) -> &mut [u8] {
                    &mut self.buffer.as_mut()[$boff..$boff + $blen]
                }
            )+)?
        }

        #[doc = concat!("A high-level representation of ", stringify!($art), " ", $what, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            $( $(#[doc = $doc])* pub $get: $ty, )*
            $($( $(#[doc = $bdoc])* pub $bget: [u8; $blen], )+)?
        }

        impl Default for Repr {
            fn default() -> Repr {
                Repr {
                    $( $get: Default::default(), )*
                    $($( $bget: [0; $blen], )+)?
                }
            }
        }

        impl Repr {
            #[doc = concat!("Parse ", stringify!($art), " ", $what, ".")]
            ///
            /// # Errors
            #[doc = concat!("[`crate::Error::Truncated`] if shorter than ", $shorter, ".")]
            pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> $crate::Result<Repr> {
                p.check_len()?;
                Ok(Repr {
                    $( $get: p.$get(), )*
                    $($( $bget: {
                        let mut a = [0; $blen];
                        a.copy_from_slice(p.$bget());
                        a
                    }, )+)?
                })
            }

            #[doc = concat!("The length this Repr emits (", $shorter, ").")]
            pub const fn buffer_len(&self) -> usize {
                $len
            }

            #[doc = concat!("Emit the ", $what, ".")]
            ///
            /// # Panics
            /// If the buffer is shorter than `buffer_len()`.
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
                $( p.$set(self.$get); )*
                $($( p.$bmut().copy_from_slice(&self.$bget); )+)?
            }
        }
    };
}
pub(crate) use layout;

/// Declares a header that is one big-endian value (IETH, ImmDt,
/// AtomicAckETH): `HEADER_LEN`, the view with the value's getter and setter,
/// and a `Repr` holding the value, with the byte-exact tests every header
/// module has, run on `$bytes` laid out as the spec says and `$value`.
macro_rules! value_header {
    (
        $art:ident $what:literal, $ty:ty = $codec:ty, $len:literal,
        $(#[doc = $doc:literal])* $get:ident / $set:ident,
        test: $bytes:expr => $value:expr
    ) => {
        /// Length of the header.
        pub const HEADER_LEN: usize = $len;

        $crate::view::layout! {
            $art $what, HEADER_LEN, concat!(stringify!($len), " bytes");
            fields {
                $(#[doc = $doc])*
                $get / $set: $ty = $codec;
            }
        }

        impl core::fmt::Display for Repr {
            fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                write!(f, concat!($what, " ", stringify!($get), " 0x{:x}"), self.$get)
            }
        }

        #[cfg(test)]
        mod tests {
            use super::*;
            use $crate::Error;

            const HEADER: [u8; $len] = $bytes;
            const VALUE: $ty = $value;

            #[test]
            fn deconstruct() {
                let p = Packet::new_checked(&HEADER[..]).unwrap();
                assert_eq!(p.$get(), VALUE);
            }

            #[test]
            fn construct() {
                let mut bytes = [0xa5u8; $len];
                Packet::new_unchecked(&mut bytes[..]).$set(VALUE);
                assert_eq!(bytes, HEADER);
            }

            #[test]
            fn parse_and_emit() {
                let p = Packet::new_checked(&HEADER[..]).unwrap();
                let repr = Repr::parse(&p).unwrap();
                assert_eq!(repr, Repr { $get: VALUE });
                let mut bytes = [0xa5u8; $len];
                repr.emit(&mut Packet::new_unchecked(&mut bytes[..]));
                assert_eq!(bytes, HEADER);
            }

            #[test]
            fn truncated() {
                assert_eq!(
                    Packet::new_checked(&HEADER[..$len - 1]).unwrap_err(),
                    Error::Truncated
                );
            }

            #[test]
            fn display_names_the_value() {
                let s = Repr { $get: VALUE }.to_string();
                assert!(s.starts_with($what), "{s}");
                assert!(s.contains(&format!("0x{:x}", VALUE)), "{s}");
            }
        }
    };
}
pub(crate) use value_header;

/// How one field of a fixed-layout message is read and written: the
/// field's place is in the type (`U32<4>`: the big-endian u32 at byte 4),
/// so a message is declared as a table of fields (see `cm_message!`).
pub(crate) trait Codec<V> {
    /// The field's value in `b`.
    fn get(b: &[u8]) -> V;
    /// Writes `v` into `b` (and clears the reserved bits the codec owns).
    fn set(b: &mut [u8], v: V);
}

/// The byte at `OFF`.
pub(crate) struct U8<const OFF: usize>;
impl<const OFF: usize> Codec<u8> for U8<OFF> {
    fn get(b: &[u8]) -> u8 {
        b[OFF]
    }
    fn set(b: &mut [u8], v: u8) {
        b[OFF] = v
    }
}

/// The big-endian u16 at `OFF`.
pub(crate) struct U16<const OFF: usize>;
impl<const OFF: usize> Codec<u16> for U16<OFF> {
    fn get(b: &[u8]) -> u16 {
        get_u16(b, OFF)
    }
    fn set(b: &mut [u8], v: u16) {
        set_u16(b, OFF, v)
    }
}

/// A 24-bit value in the high 3 bytes of the 32-bit word at `OFF` whose low
/// byte is reserved (a QPN or PSN followed by a reserved byte).
pub(crate) struct U24Word<const OFF: usize>;
impl<const OFF: usize> Codec<u32> for U24Word<OFF> {
    fn get(b: &[u8]) -> u32 {
        get_u24(b, OFF)
    }
    fn set(b: &mut [u8], v: u32) {
        set_u32(b, OFF, (v & 0xff_ffff) << 8)
    }
}

/// The big-endian 24-bit value in the 3 bytes at `OFF` (a vendor ID, a
/// round-trip time); the high byte of the u32 is ignored on write.
pub(crate) struct U24<const OFF: usize>;
impl<const OFF: usize> Codec<u32> for U24<OFF> {
    fn get(b: &[u8]) -> u32 {
        get_u24(b, OFF)
    }
    fn set(b: &mut [u8], v: u32) {
        set_u24(b, OFF, v)
    }
}

/// The big-endian u32 at `OFF`.
pub(crate) struct U32<const OFF: usize>;
impl<const OFF: usize> Codec<u32> for U32<OFF> {
    fn get(b: &[u8]) -> u32 {
        get_u32(b, OFF)
    }
    fn set(b: &mut [u8], v: u32) {
        set_u32(b, OFF, v)
    }
}

/// The big-endian u64 at `OFF`.
pub(crate) struct U64<const OFF: usize>;
impl<const OFF: usize> Codec<u64> for U64<OFF> {
    fn get(b: &[u8]) -> u64 {
        get_u64(b, OFF)
    }
    fn set(b: &mut [u8], v: u64) {
        set_u64(b, OFF, v)
    }
}

/// `W` bits of byte `OFF` from spec bit `BIT` (0 = most significant); the
/// byte's other bits are left alone.
pub(crate) struct Bits<const OFF: usize, const BIT: u32, const W: u32>;
impl<const OFF: usize, const BIT: u32, const W: u32> Codec<u8> for Bits<OFF, BIT, W> {
    fn get(b: &[u8]) -> u8 {
        get_bits(b, OFF, BIT, W)
    }
    fn set(b: &mut [u8], v: u8) {
        set_bits(b, OFF, BIT, W, v)
    }
}

/// The single bit `BIT` of byte `OFF`.
pub(crate) struct Flag<const OFF: usize, const BIT: u32>;
impl<const OFF: usize, const BIT: u32> Codec<bool> for Flag<OFF, BIT> {
    fn get(b: &[u8]) -> bool {
        get_bits(b, OFF, BIT, 1) != 0
    }
    fn set(b: &mut [u8], v: bool) {
        set_bits(b, OFF, BIT, 1, u8::from(v))
    }
}

/// Field `F`, written after zeroing the `LEN` reserved bytes at `AT` (which
/// may be the byte `F` shares with its reserved bits).
pub(crate) struct Zeroing<F, const AT: usize, const LEN: usize>(core::marker::PhantomData<F>);
impl<V, F: Codec<V>, const AT: usize, const LEN: usize> Codec<V> for Zeroing<F, AT, LEN> {
    fn get(b: &[u8]) -> V {
        F::get(b)
    }
    fn set(b: &mut [u8], v: V) {
        b[AT..AT + LEN].fill(0);
        F::set(b, v)
    }
}

/// Field `F` of byte `OFF`, written with the reserved bits `BIT..BIT + W`
/// of that byte cleared (the byte's other fields are left alone).
pub(crate) struct ZeroingBits<F, const OFF: usize, const BIT: u32, const W: u32>(
    core::marker::PhantomData<F>,
);
impl<V, F: Codec<V>, const OFF: usize, const BIT: u32, const W: u32> Codec<V>
    for ZeroingBits<F, OFF, BIT, W>
{
    fn get(b: &[u8]) -> V {
        F::get(b)
    }
    fn set(b: &mut [u8], v: V) {
        F::set(b, v);
        set_bits(b, OFF, BIT, W, 0)
    }
}
