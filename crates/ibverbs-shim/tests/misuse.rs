//! Programs misuse libibverbs: a C program built against Debian's verbs.h
//! and linked to the shim makes the classic mistakes, and each must get the
//! errno real libibverbs/rxe gives — never an abort.
//!
//! Needs `cc` and `<infiniband/verbs.h>` (libibverbs-dev); skips without the
//! header unless `RDMAKIT_REQUIRE_IBVERBS_DEV=1` (scripts/test sets it).

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define SHOW(name, rc) do { int _r = (int)(rc); int _e = errno; printf("%s %d %d\n", name, _r, _e); } while (0)
#define SHOWP(name, p) do { errno = 0; void *_p = (p); int _e = errno; printf("%s %d %d\n", name, _p != NULL, _p ? 0 : _e); } while (0)

int main(void) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1) { printf("no device\n"); return 2; }
    SHOWP("open_null", ibv_open_device(NULL));
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx) { printf("open failed %d\n", errno); return 2; }
    SHOWP("alloc_pd_null", ibv_alloc_pd(NULL));
    struct ibv_port_attr pa;
    errno = 0; SHOW("query_port_9", ibv_query_port(ctx, 9, &pa) != 0);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    char *buf = calloc(1, 4096);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    SHOWP("reg_mr_odp", ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND));
    errno = 0; SHOW("dealloc_pd_in_use", ibv_dealloc_pd(pd));
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
    errno = 0; SHOW("destroy_channel_in_use", ibv_destroy_comp_channel(ch));
    SHOWP("create_qp_null_attr", ibv_create_qp(pd, NULL));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = cq; ia.recv_cq = cq; ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 4; ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = 100000; ia.cap.max_recv_sge = 1;
    SHOWP("create_qp_too_many_sge", ibv_create_qp(pd, &ia));
    ia.cap.max_send_sge = 1;
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    struct ibv_sge sge = { (uintptr_t)buf, 64, mr->lkey };
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge; wr.num_sge = 1; wr.opcode = IBV_WR_SEND; wr.send_flags = IBV_SEND_SIGNALED;
    errno = 0; SHOW("post_send_reset", ibv_post_send(qp, &wr, &bad));
    printf("bad_wr_is_first %d 0\n", bad == &wr);
    struct ibv_qp_attr qa;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    errno = 0; SHOW("modify_reset_to_rts", ibv_modify_qp(qp, &qa, IBV_QP_STATE));
    /* A list of receives whose second WR has too many SGEs: the first is
       posted, *bad_wr names the second; the next post starts afresh. */
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_INIT; qa.port_num = 1; qa.pkey_index = 0;
    qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
    errno = 0; SHOW("modify_to_init", ibv_modify_qp(qp, &qa,
        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
    struct ibv_sge two[2] = { { (uintptr_t)buf, 32, mr->lkey }, { (uintptr_t)buf + 32, 32, mr->lkey } };
    struct ibv_recv_wr r2 = { .wr_id = 2, .next = NULL, .sg_list = two, .num_sge = 2 };
    struct ibv_recv_wr r1 = { .wr_id = 1, .next = &r2, .sg_list = &sge, .num_sge = 1 };
    struct ibv_recv_wr *rbad = NULL;
    errno = 0; SHOW("post_recv_second_bad", ibv_post_recv(qp, &r1, &rbad));
    printf("recv_bad_wr_is_second %d 0\n", rbad == &r2);
    r1.next = NULL; rbad = NULL;
    errno = 0; SHOW("post_recv_after_failure", ibv_post_recv(qp, &r1, &rbad));
    printf("recv_bad_wr_untouched %d 0\n", rbad == NULL);
    errno = 0; SHOW("destroy_cq_in_use", ibv_destroy_cq(cq));
    errno = 0; SHOW("destroy_qp", ibv_destroy_qp(qp));
    errno = 0; SHOW("post_send_destroyed", ibv_post_send(qp, &wr, &bad));
    errno = 0; SHOW("destroy_qp_twice", ibv_destroy_qp(qp));
    errno = 0; SHOW("dereg_mr", ibv_dereg_mr(mr));
    errno = 0; SHOW("dereg_mr_twice", ibv_dereg_mr(mr));
    struct ibv_wc wc;
    errno = 0; SHOW("poll_cq_negative", ibv_poll_cq(cq, -1, &wc) < 0);
    /* Close with the PD, CQ and channel still alive: like closing the
       uverbs fd, everything goes; later calls on them fail cleanly. */
    errno = 0; SHOW("close_with_live_objects", ibv_close_device(ctx));
    errno = 0; SHOW("close_twice", ibv_close_device(ctx));
    ibv_free_device_list(list);
    printf("done 0 0\n");
    return 0;
}
"#;

/// (name, rc, errno) expected: errno names as real libibverbs on rxe
/// returns them (rxe_verbs.c / uverbs: EBUSY for objects in use, EINVAL for
/// bad arguments and wrong states).
const EXPECT: &[(&str, i32, i32)] = &[
    ("open_null", 0, libc::EINVAL),
    ("alloc_pd_null", 0, libc::EINVAL),
    ("query_port_9", 1, -1),
    ("reg_mr_odp", 0, libc::EOPNOTSUPP),
    ("dealloc_pd_in_use", libc::EBUSY, -1),
    ("destroy_channel_in_use", -1, libc::EBUSY),
    ("create_qp_null_attr", 0, libc::EINVAL),
    ("create_qp_too_many_sge", 0, libc::EINVAL),
    ("post_send_reset", libc::EINVAL, -1),
    ("bad_wr_is_first", 1, 0),
    ("modify_reset_to_rts", libc::EINVAL, -1),
    ("modify_to_init", 0, -1),
    ("post_recv_second_bad", libc::EINVAL, -1),
    ("recv_bad_wr_is_second", 1, 0),
    ("post_recv_after_failure", 0, -1),
    ("recv_bad_wr_untouched", 1, 0),
    ("destroy_cq_in_use", libc::EBUSY, -1),
    ("destroy_qp", 0, -1),
    ("post_send_destroyed", libc::EINVAL, -1),
    ("destroy_qp_twice", libc::EINVAL, -1),
    ("dereg_mr", 0, -1),
    ("dereg_mr_twice", libc::EINVAL, -1),
    ("poll_cq_negative", 1, -1),
    ("close_with_live_objects", 0, -1),
    ("close_twice", -1, libc::EINVAL),
    ("done", 0, 0),
];

#[test]
fn misuse_gets_the_errno_not_an_abort() {
    let Some((_dir, bin)) = common::verbs_program(PROGRAM, "misuse", &[]) else {
        return;
    };
    let lib = common::shim_dir();
    let o = Command::new(&bin)
        .env("LD_LIBRARY_PATH", lib)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{:?}\n{stdout}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let got: Vec<(String, i32, i32)> = stdout
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            (
                w.next().unwrap().to_string(),
                w.next().unwrap().parse().unwrap(),
                w.next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(got.len(), EXPECT.len(), "{stdout}");
    for ((name, rc, errno), (ename, erc, eerrno)) in got.iter().zip(EXPECT) {
        assert_eq!(name, ename);
        assert_eq!(*rc, *erc, "{name}: return value\n{stdout}");
        if *eerrno >= 0 {
            assert_eq!(*errno, *eerrno, "{name}: errno\n{stdout}");
        }
    }
}
