//! The layer of the RDMA stack a failure or finding belongs to (layered
//! fault localization): where to look next.

use core::fmt;

/// The stack layer a failure or finding points at.
///
/// Ordered bottom-up (`Fabric < Hardware < Kernel < Library < Application`):
/// the doctor sorts and groups findings in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layer {
    /// The InfiniBand fabric beyond this host's port: switches, links,
    /// routes and the subnet manager (a MAD that gets no reply, a status a
    /// remote agent returned).
    Fabric,
    /// The device or the network (DMA mapping, the wire, links, firmware).
    Hardware,
    /// The kernel driver and subsystems (resource tables, limits, modify_qp
    /// validation, modules, device nodes).
    Kernel,
    /// The user-space library and provider (libibverbs, the provider's
    /// post_send checks, device open).
    Library,
    /// The application's own arguments, usage or environment (a range outside
    /// its buffer, memlock limits, permissions).
    Application,
}

impl Layer {
    /// Every layer, bottom-up.
    pub const ALL: [Layer; 5] = [
        Layer::Fabric,
        Layer::Hardware,
        Layer::Kernel,
        Layer::Library,
        Layer::Application,
    ];

    /// The lowercase name ("kernel"), as reports and JSON print it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Layer::Fabric => "fabric",
            Layer::Hardware => "hardware",
            Layer::Kernel => "kernel",
            Layer::Library => "library",
            Layer::Application => "application",
        }
    }

    /// The layer named `s` ("kernel", any case).
    pub fn parse(s: &str) -> Option<Layer> {
        Layer::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_order_is_bottom_up() {
        for l in Layer::ALL {
            assert_eq!(Layer::parse(l.as_str()), Some(l));
            assert_eq!(Layer::parse(&l.as_str().to_ascii_uppercase()), Some(l));
            assert_eq!(l.to_string(), l.as_str());
        }
        assert_eq!(Layer::parse("firmware"), None);
        assert!(Layer::ALL.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            Layer::ALL.map(Layer::as_str),
            ["fabric", "hardware", "kernel", "library", "application"]
        );
    }
}
