//! rdmakit-verbs (in progress)
