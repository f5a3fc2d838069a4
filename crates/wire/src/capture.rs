//! Capture decoding (pcap / pcapng) into a report: in progress.
