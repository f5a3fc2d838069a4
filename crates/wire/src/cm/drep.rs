//! DREP, the reply to a disconnect request (IBTA Vol 1 §12.6.11, table 113).
//! Bytes 0-3 local communication ID, 4-7 remote communication ID, 8-231 private
//! data (224 bytes).

super::ids_and_private_data!("DREP", 224);
