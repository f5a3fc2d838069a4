//! What UCX, libfabric and rdma-core's own tests expect of a device (issue
//! 20), checked by a C program built against Debian's verbs.h and linked to
//! the shim: one GID table for every context, the GID table query, real
//! async and command descriptors, UD completions with the fields rxe/mlx5
//! fill for RoCEv2 (GRH flag, network header type in `sl`, source QP, P_Key
//! index), receive-only QPs, AVs without a GRH refused except for the
//! loopback port's own LID, the AV returned by
//! `ibv_query_qp`, the kernel's argument checks (completion vector, create
//! flags), no verb blocked forever by an event that can no longer come, a
//! signal interrupting `ibv_get_cq_event` as it interrupts the kernel's read, and
//! debug lines that say why a verb failed.
//!
//! Needs `cc` and `<infiniband/verbs.h>` (libibverbs-dev); skips without the
//! header unless `RDMAKIT_REQUIRE_IBVERBS_DEV=1` (scripts/test sets it).

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int fails;
#define CHECK(name, cond, ...) do { if (cond) printf("ok %s\n", name); else { \
    printf("FAIL %s: ", name); printf(__VA_ARGS__); printf("\n"); fails++; } } while (0)

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qkey) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = cq; ia.recv_cq = cq; ia.qp_type = IBV_QPT_UD;
    ia.cap.max_send_wr = 8; ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = 1; ia.cap.max_recv_sge = 1;
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    if (!qp) return NULL;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT; a.port_num = 1; a.qkey = qkey;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return NULL;
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) return NULL;
    a.qp_state = IBV_QPS_RTS; a.sq_psn = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return NULL;
    return qp;
}

/* The interface index of the netdev holding IPv4 address `a` (4 bytes). */
static unsigned ifindex_of(const uint8_t *a) {
    struct ifaddrs *ifa, *i;
    unsigned found = 0;
    if (getifaddrs(&ifa)) return 0;
    for (i = ifa; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET
            && !memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, 4))
            found = if_nametoindex(i->ifa_name);
    freeifaddrs(ifa);
    return found;
}

static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc) {
    for (int i = 0; i < 2000000; i++) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n) return n;
    }
    return 0;
}

struct waiter { struct ibv_comp_channel *ch; struct ibv_context *ctx; int rc, err, done; };

static void *wait_cq_event(void *p) {
    struct waiter *w = p;
    struct ibv_cq *cq; void *cq_ctx;
    w->rc = ibv_get_cq_event(w->ch, &cq, &cq_ctx);
    w->err = errno; w->done = 1;
    return NULL;
}

static void on_signal(int sig) { (void)sig; }

static void *wait_async_event(void *p) {
    struct waiter *w = p;
    struct ibv_async_event ev;
    w->rc = ibv_get_async_event(w->ctx, &ev);
    w->err = errno; w->done = 1;
    return NULL;
}

int main(int argc, char **argv) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { printf("no device\n"); return 2; }
    struct ibv_context *c1 = ibv_open_device(list[0]);
    struct ibv_context *c2 = ibv_open_device(list[0]);
    if (!c1 || !c2) { printf("open failed %d\n", errno); return 2; }

    /* One device, one GID table, one GUID. */
    union ibv_gid g1, g2;
    ibv_query_gid(c1, 1, 0, &g1);
    ibv_query_gid(c2, 1, 0, &g2);
    /* The host device's GID: ::ffff: and the host's address (argv[1]). */
    uint8_t host[16] = {0,0,0,0,0,0,0,0,0,0,0xff,0xff};
    if (argc < 2 || inet_pton(AF_INET, argv[1], host + 12) != 1) { printf("usage: device ADDR\n"); return 2; }
    CHECK("one_gid_table", !memcmp(&g1, &g2, 16) && !memcmp(&g1, host, 16), "gids differ or not ::ffff:%s", argv[1]);
    struct ibv_device_attr d1, d2;
    ibv_query_device(c1, &d1); ibv_query_device(c2, &d2);
    CHECK("one_guid", d1.node_guid == d2.node_guid && d1.node_guid == ibv_get_device_guid(list[0]),
          "%llx %llx %llx", (unsigned long long)d1.node_guid, (unsigned long long)d2.node_guid,
          (unsigned long long)ibv_get_device_guid(list[0]));
    struct ibv_gid_entry ents[16];
    ssize_t ne = ibv_query_gid_table(c1, ents, 16, 0);
    CHECK("gid_table", ne == 1 && ents[0].gid_type == IBV_GID_TYPE_ROCE_V2 && ents[0].gid_index == 0
          && ents[0].port_num == 1 && ents[0].ndev_ifindex == ifindex_of(host + 12)
          && !memcmp(&ents[0].gid, host, 16), "n %zd type %u ifindex %u", ne, ents[0].gid_type, ents[0].ndev_ifindex);
    CHECK("gid_table_too_small", ibv_query_gid_table(c1, ents, 0, 0) == -EINVAL, "expected -EINVAL");

    /* Real descriptors: async events (UCX polls it), the context (cmd_fd). */
    CHECK("async_fd", c1->async_fd >= 0 && (fcntl(c1->async_fd, F_GETFD) & FD_CLOEXEC), "async_fd %d", c1->async_fd);
    CHECK("cmd_fd", c1->cmd_fd >= 0 && (fcntl(c1->cmd_fd, F_GETFD) & FD_CLOEXEC) && c1->cmd_fd != c2->cmd_fd,
          "cmd_fd %d %d", c1->cmd_fd, c2->cmd_fd);
    struct pollfd pfd = { c1->async_fd, POLLIN, 0 };
    CHECK("async_fd_quiet", poll(&pfd, 1, 0) == 0, "readable with no event");
    fcntl(c1->async_fd, F_SETFL, fcntl(c1->async_fd, F_GETFL) | O_NONBLOCK);
    struct ibv_async_event ev;
    errno = 0;
    CHECK("async_nonblocking_eagain", ibv_get_async_event(c1, &ev) == -1 && errno == EAGAIN, "errno %d", errno);

    /* The kernel's argument checks. */
    errno = 0;
    CHECK("cq_bad_comp_vector", !ibv_create_cq(c1, 16, NULL, NULL, c1->num_comp_vectors) && errno == EINVAL,
          "errno %d", errno);
    struct ibv_cq_init_attr_ex cx;
    memset(&cx, 0, sizeof cx);
    cx.cqe = 16; cx.comp_vector = c1->num_comp_vectors; cx.wc_flags = IBV_WC_STANDARD_FLAGS;
    errno = 0;
    CHECK("cq_ex_bad_comp_vector", !ibv_create_cq_ex(c1, &cx) && errno == EINVAL, "errno %d", errno);
    struct ibv_pd *p1 = ibv_alloc_pd(c1), *p2 = ibv_alloc_pd(c2);
    struct ibv_cq *q1 = ibv_create_cq(c1, 64, NULL, NULL, 0), *q2 = ibv_create_cq(c2, 64, NULL, NULL, 0);
    struct ibv_qp_init_attr_ex ix;
    memset(&ix, 0, sizeof ix);
    ix.send_cq = q1; ix.recv_cq = q1; ix.qp_type = IBV_QPT_RC; ix.pd = p1;
    ix.cap.max_send_wr = 4; ix.cap.max_recv_wr = 4; ix.cap.max_send_sge = 1; ix.cap.max_recv_sge = 1;
    ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    struct ibv_qp *qx = ibv_create_qp_ex(c1, &ix);
    CHECK("qp_ex_create_flags_0", qx != NULL, "errno %d", errno);
    ix.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    errno = 0;
    CHECK("qp_ex_create_flag_refused", !ibv_create_qp_ex(c1, &ix) && errno == EOPNOTSUPP, "errno %d", errno);

    /* A receive-only QP (qperf's rc_bw server). */
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = q1; ia.recv_cq = q1; ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 0; ia.cap.max_recv_wr = 8; ia.cap.max_send_sge = 1; ia.cap.max_recv_sge = 1;
    struct ibv_qp *ro = ibv_create_qp(p1, &ia);
    CHECK("receive_only_qp", ro && ia.cap.max_send_wr == 0, "errno %d", errno);

    /* RoCE needs a GRH: an AV without one is EINVAL (rdma-core's test_create_ah_roce),
       except the LID the loopback device's port reports, which is the device itself. */
    struct ibv_port_attr pa;
    ibv_query_port(c1, 1, &pa);
    CHECK("loopback_port_lid", pa.lid == 1 && pa.link_layer == IBV_LINK_LAYER_ETHERNET, "lid %u", pa.lid);
    struct ibv_ah_attr lid;
    memset(&lid, 0, sizeof lid);
    lid.port_num = 1; lid.dlid = 0;
    errno = 0;
    CHECK("no_grh_ah_refused", !ibv_create_ah(p1, &lid) && errno == EINVAL, "errno %d", errno);
    lid.dlid = pa.lid;
    struct ibv_ah *lah = ibv_create_ah(p1, &lid);
    CHECK("port_lid_ah", lah != NULL, "errno %d", errno);
    lid.dlid = 7;
    errno = 0;
    CHECK("lid7_ah_refused", !ibv_create_ah(p1, &lid) && errno == EINVAL, "errno %d", errno);

    /* UD between two contexts of one process, addressed by the shared GID. */
    char *b1 = calloc(1, 4096), *b2 = calloc(1, 4096);
    struct ibv_mr *m1 = ibv_reg_mr(p1, b1, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *m2 = ibv_reg_mr(p2, b2, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp *ua = ud_qp(p1, q1, 0x1234), *ub = ud_qp(p2, q2, 0x1234);
    CHECK("ud_qps", ua && ub && ua->qp_num != ub->qp_num, "errno %d", errno);
    struct ibv_ah_attr ga;
    memset(&ga, 0, sizeof ga);
    ga.is_global = 1; ga.port_num = 1; ga.grh.dgid = g2; ga.grh.hop_limit = 64;
    struct ibv_ah *ah = ibv_create_ah(p1, &ga);
    for (int round = 0; round < 2; round++) {
        struct ibv_sge rs = { (uintptr_t)b2, 40 + 64, m2->lkey };
        struct ibv_recv_wr rw, *rbad;
        memset(&rw, 0, sizeof rw);
        rw.wr_id = 7; rw.sg_list = &rs; rw.num_sge = 1;
        ibv_post_recv(ub, &rw, &rbad);
        strcpy(b1, "datagram");
        struct ibv_sge ss = { (uintptr_t)b1, 8, m1->lkey };
        struct ibv_send_wr sw, *sbad;
        memset(&sw, 0, sizeof sw);
        sw.wr_id = 8; sw.sg_list = &ss; sw.num_sge = 1; sw.opcode = IBV_WR_SEND;
        sw.send_flags = IBV_SEND_SIGNALED;
        sw.wr.ud.ah = round == 0 ? ah : lah; sw.wr.ud.remote_qpn = ub->qp_num; sw.wr.ud.remote_qkey = 0x1234;
        CHECK(round == 0 ? "ud_send_gid" : "ud_send_port_lid", ibv_post_send(ua, &sw, &sbad) == 0, "errno %d", errno);
        struct ibv_wc wc;
        memset(&wc, 0, sizeof wc);
        int got = wait_one(q2, &wc);
        CHECK(round == 0 ? "ud_recv_fields" : "ud_recv_fields_port_lid",
              got == 1 && wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_GRH) && wc.sl == 2
              && wc.src_qp == ua->qp_num && wc.pkey_index == 0 && wc.byte_len == 48 && wc.qp_num == ub->qp_num
              && !memcmp(b2 + 40, "datagram", 8),
              "got %d status %d flags %x sl %u src_qp %u (want %u) pkey %u len %u",
              got, wc.status, wc.wc_flags, wc.sl, wc.src_qp, ua->qp_num, wc.pkey_index, wc.byte_len);
        /* UCX (sl = 2, IPv4) reads the destination address from the last 4 bytes of the GRH area. */
        CHECK("ud_grh_ipv4_header", (uint8_t)b2[20] == 0x45 && !memcmp(b2 + 36, host + 12, 4)
              && !memcmp(b2 + 32, host + 12, 4), "grh %02x dst %d.%d.%d.%d", (uint8_t)b2[20],
              (uint8_t)b2[36], (uint8_t)b2[37], (uint8_t)b2[38], (uint8_t)b2[39]);
        wait_one(q1, &wc);
    }

    /* ibv_query_qp returns the AV that was set. */
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT; qa.port_num = 1; qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    ibv_modify_qp(qx, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    qa.qp_state = IBV_QPS_RTR; qa.path_mtu = IBV_MTU_1024; qa.dest_qp_num = ro->qp_num; qa.rq_psn = 5;
    qa.max_dest_rd_atomic = 1; qa.min_rnr_timer = 12;
    qa.ah_attr = ga; qa.ah_attr.grh.traffic_class = 3; qa.ah_attr.sl = 1;
    CHECK("rc_rtr", ibv_modify_qp(qx, &qa, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN
          | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0, "errno %d", errno);
    struct ibv_qp_attr got;
    struct ibv_qp_init_attr gi;
    memset(&got, 0, sizeof got);
    ibv_query_qp(qx, &got, IBV_QP_AV, &gi);
    CHECK("query_qp_av", got.ah_attr.is_global == 1 && !memcmp(&got.ah_attr.grh.dgid, &g2, 16)
          && got.ah_attr.grh.hop_limit == 64 && got.ah_attr.grh.traffic_class == 3 && got.ah_attr.sl == 1
          && got.ah_attr.port_num == 1, "is_global %d hop %u tc %u", got.ah_attr.is_global,
          got.ah_attr.grh.hop_limit, got.ah_attr.grh.traffic_class);

    /* A receive names its lkey; it is checked when data lands, as on rxe. */
    struct ibv_sge bs = { (uintptr_t)b1, 64, 0xdeadbe };
    struct ibv_recv_wr br, *brb;
    memset(&br, 0, sizeof br);
    br.sg_list = &bs; br.num_sge = 1;
    CHECK("post_recv_checks_lkey_at_use", ibv_post_recv(qx, &br, &brb) == 0, "errno %d", errno);

    uint8_t mac[6]; uint16_t vid = 0;
    CHECK("resolve_eth_l2", ibv_resolve_eth_l2_from_gid(c1, &ga, mac, &vid) == 0 && mac[0] == 2
          && !memcmp(mac + 2, host + 12, 4) && vid == 0xffff, "mac %02x:..:%02x", mac[0], mac[5]);

    /* No verb blocks forever when its event can no longer come: a channel
       destroyed, or a context closed, under a waiting thread. */
    struct waiter w1 = { ibv_create_comp_channel(c1), NULL, 0, 0, 0 };
    pthread_t t1;
    pthread_create(&t1, NULL, wait_cq_event, &w1);
    usleep(100000);
    CHECK("cq_event_waits", !w1.done, "returned before anything happened");
    ibv_destroy_comp_channel(w1.ch);
    for (int i = 0; i < 200 && !w1.done; i++) usleep(10000);
    CHECK("cq_event_channel_destroyed", w1.done && w1.rc == -1 && w1.err == EIO, "done %d rc %d errno %d",
          w1.done, w1.rc, w1.err);
    if (w1.done) pthread_join(t1, NULL);
    /* A signal interrupts the wait as it interrupts the kernel's read() of
       the channel: EINTR without SA_RESTART (qperf ends its ping-pong on
       SIGALRM so), the wait goes on with it. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    struct waiter w4 = { ibv_create_comp_channel(c1), NULL, 0, 0, 0 };
    pthread_t t4;
    pthread_create(&t4, NULL, wait_cq_event, &w4);
    usleep(100000);
    pthread_kill(t4, SIGUSR1);
    for (int i = 0; i < 200 && !w4.done; i++) usleep(10000);
    CHECK("cq_event_interrupted_by_signal", w4.done && w4.rc == -1 && w4.err == EINTR,
          "done %d rc %d errno %d", w4.done, w4.rc, w4.err);
    if (w4.done) pthread_join(t4, NULL);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    w4.done = 0;
    pthread_create(&t4, NULL, wait_cq_event, &w4);
    usleep(100000);
    pthread_kill(t4, SIGUSR1);
    usleep(200000);
    CHECK("cq_event_restarted_after_signal", !w4.done, "returned rc %d errno %d", w4.rc, w4.err);
    ibv_destroy_comp_channel(w4.ch);
    for (int i = 0; i < 200 && !w4.done; i++) usleep(10000);
    CHECK("cq_event_restarted_then_destroyed", w4.done && w4.rc == -1 && w4.err == EIO,
          "done %d rc %d errno %d", w4.done, w4.rc, w4.err);
    if (w4.done) pthread_join(t4, NULL);
    struct ibv_context *c3 = ibv_open_device(list[0]);
    struct waiter w2 = { NULL, c3, 0, 0, 0 };
    pthread_t t2;
    pthread_create(&t2, NULL, wait_async_event, &w2);
    usleep(100000);
    CHECK("async_event_waits", !w2.done, "returned before anything happened");
    ibv_close_device(c3);
    for (int i = 0; i < 200 && !w2.done; i++) usleep(10000);
    CHECK("async_event_context_closed", w2.done && w2.rc == -1 && w2.err == EIO, "done %d rc %d errno %d",
          w2.done, w2.rc, w2.err);
    if (w2.done) pthread_join(t2, NULL);

    printf("done %d\n", fails);
    return fails ? 1 : 0;
}
"#;

#[test]
fn a_device_as_ucx_libfabric_and_pyverbs_expect_it() {
    let Some((_dir, bin)) = common::verbs_program(PROGRAM, "device", &["-Wall", "-pthread"]) else {
        return;
    };
    let lib = common::shim_dir();
    let o = Command::new(&bin)
        .arg(rdmakit_soft::net::host_device_addr().to_string())
        .env("LD_LIBRARY_PATH", lib)
        .env("RDMAKIT_SHIM_DEBUG", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && stdout.contains("done 0"),
        "{:?}\n{stdout}\n{stderr}",
        o.status
    );
    // Debug lines say why a verb failed, not only the errno.
    for why in [
        "ibv_create_cq: comp_vector",
        "not below num_comp_vectors",
        "ibv_create_ah: EINVAL (22): no GRH and DLID 7",
    ] {
        assert!(stderr.contains(why), "no {why:?} in\n{stderr}");
    }
}
