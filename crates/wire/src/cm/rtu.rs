//! RTU, ready to use (IBTA Vol 1 §12.6.9, table 111): the active side's answer
//! to a REP. Bytes 0-3 local communication ID, 4-7 remote communication ID,
//! 8-231 private data (224 bytes).

super::ids_and_private_data!("RTU", 224);
