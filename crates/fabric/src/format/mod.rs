//! Topology files: ibnetdiscover's format (read and written), which also
//! reads ibsim's net format.

pub mod ibnetdiscover;
