/*
 * rdma_cm semantics an application relies on, checked through the public
 * API only (built against rdma-core 44's <rdma/rdma_cma.h>, run on rdmakit's
 * librdmacm.so.1 by tests/semantics.rs). Each mode prints "ok <mode>" and
 * exits 0, or prints what differed and exits 1.
 *
 *   channel   the event fd: non-blocking gets EAGAIN, poll(2) sees events
 *   addr      ADDR_RESOLVED / ROUTE_RESOLVED, the route's GIDs and path
 *             (its traffic class the ToS set before it)
 *   errors    EADDRNOTAVAIL / EADDRINUSE / ADDR_ERROR / REJECTED (no listener)
 *   connect   REQ with private data, reject with private data (status 28),
 *             accept, ESTABLISHED both sides, DISCONNECTED both sides,
 *             TIMEWAIT_EXIT, all in one process on two channels
 *   ep        rdma_getaddrinfo + rdma_create_ep + the rdma_verbs.h helpers
 *             (rdma_reg_msgs, rdma_post_recv/send, rdma_post_write/read,
 *             rdma_get_recv_comp/send_comp) between two threads
 *   qpattr    rdma_init_qp_attr for INIT/RTR/RTS on both ends
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define FAIL(...)                                                              \
	do {                                                                   \
		fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__);           \
		fprintf(stderr, __VA_ARGS__);                                  \
		fprintf(stderr, "\n");                                         \
		exit(1);                                                       \
	} while (0)

static int base_port;

static struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in s = { .sin_family = AF_INET };
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* Waits (at most 10 s) for the next event on a channel and checks its type. */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch,
				    enum rdma_cm_event_type want)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 10000) != 1)
		FAIL("no event within 10 s (wanted %s)", rdma_event_str(want));
	if (rdma_get_cm_event(ch, &ev))
		FAIL("rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != want)
		FAIL("got %s status %d, wanted %s", rdma_event_str(ev->event),
		     ev->status, rdma_event_str(want));
	return ev;
}

static void mode_channel(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct sockaddr_in dst = sin4("127.0.0.1", base_port);
	struct pollfd p;

	if (!ch)
		FAIL("rdma_create_event_channel: %s", strerror(errno));
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_get_cm_event(ch, &ev) != -1 || errno != EAGAIN)
		FAIL("empty non-blocking channel: want -1/EAGAIN, got errno %d", errno);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	if (poll(&p, 1, 0) != 0)
		FAIL("empty channel polls readable");
	if (rdma_create_id(ch, &id, (void *)0x1234, RDMA_PS_TCP))
		FAIL("rdma_create_id: %s", strerror(errno));
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		FAIL("rdma_resolve_addr: %s", strerror(errno));
	if (poll(&p, 1, 5000) != 1 || !(p.revents & POLLIN))
		FAIL("the fd did not poll readable for ADDR_RESOLVED");
	if (rdma_get_cm_event(ch, &ev))
		FAIL("rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED || ev->id != id ||
	    ev->id->context != (void *)0x1234)
		FAIL("event %s id %p", rdma_event_str(ev->event), ev->id);
	rdma_ack_cm_event(ev);
	if (poll(&p, 1, 0) != 0)
		FAIL("the fd still polls readable with no event queued");
	if (rdma_get_cm_event(ch, &ev) != -1 || errno != EAGAIN)
		FAIL("drained channel: want EAGAIN");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static void mode_addr(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct sockaddr_in dst = sin4("127.0.0.1", base_port);
	struct sockaddr_in *src;
	struct ibv_sa_path_rec *pr;
	uint8_t tos = 0x68;
	int tos4 = 0x68;

	rdma_create_id(ch, &id, NULL, RDMA_PS_TCP);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		FAIL("rdma_resolve_addr: %s", strerror(errno));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (!id->verbs || !id->pd || id->port_num != 1)
		FAIL("not attached to the device: verbs %p pd %p port %d", id->verbs,
		     id->pd, id->port_num);
	src = (struct sockaddr_in *)rdma_get_local_addr(id);
	if (src->sin_family != AF_INET || ntohs(src->sin_port) < 32768)
		FAIL("source %s:%d not an ephemeral port", inet_ntoa(src->sin_addr),
		     ntohs(src->sin_port));
	if (ntohs(rdma_get_dst_port(id)) != base_port)
		FAIL("dst port %d", ntohs(rdma_get_dst_port(id)));
	if (id->route.addr.addr.ibaddr.sgid.raw[10] != 0xff ||
	    id->route.addr.addr.ibaddr.pkey != htons(0xffff))
		FAIL("sgid is not an IPv4-mapped RoCEv2 GID / pkey 0x%x",
		     ntohs(id->route.addr.addr.ibaddr.pkey));
	/* The ToS is one byte, as the kernel takes it; it becomes the
	 * route's traffic class. */
	errno = 0;
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos4, sizeof tos4) != -1 ||
	    errno != EINVAL)
		FAIL("a 4-byte ToS: errno %d, want EINVAL", errno);
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos))
		FAIL("rdma_set_option(TOS): %s", strerror(errno));
	if (rdma_resolve_route(id, 2000))
		FAIL("rdma_resolve_route: %s", strerror(errno));
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	if (id->route.num_paths != 1 || !id->route.path_rec)
		FAIL("%d paths", id->route.num_paths);
	pr = id->route.path_rec;
	if (pr->traffic_class != tos)
		FAIL("path traffic class 0x%x, want the ToS 0x%x", pr->traffic_class, tos);
	if (pr->packet_life_time != 18 || pr->hop_limit != 64 ||
	    pr->pkey != htons(0xffff) || pr->mtu < 3 || pr->numb_path != 1)
		FAIL("path: life %d hop %d pkey 0x%x mtu %d", pr->packet_life_time,
		     pr->hop_limit, ntohs(pr->pkey), pr->mtu);
	if (memcmp(&pr->sgid, &id->route.addr.addr.ibaddr.sgid, 16))
		FAIL("path sgid differs from the route's");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

static void mode_errors(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *a, *b, *c, *d;
	struct sockaddr_in any = sin4("0.0.0.0", base_port);
	struct sockaddr_in far = sin4("192.0.2.1", base_port);
	struct sockaddr_in lo = sin4("127.0.0.1", base_port + 1);

	rdma_create_id(ch, &a, NULL, RDMA_PS_TCP);
	rdma_create_id(ch, &b, NULL, RDMA_PS_TCP);
	if (rdma_bind_addr(a, (struct sockaddr *)&far) != -1 || errno != EADDRNOTAVAIL)
		FAIL("bind to 192.0.2.1: want EADDRNOTAVAIL, errno %d", errno);
	if (rdma_bind_addr(a, (struct sockaddr *)&any))
		FAIL("bind 0.0.0.0:%d: %s", base_port, strerror(errno));
	if (a->verbs)
		FAIL("a wildcard bind attached a device");
	if (rdma_bind_addr(b, (struct sockaddr *)&any) != -1 || errno != EADDRINUSE)
		FAIL("second bind to the port: want EADDRINUSE, errno %d", errno);
	/* The soft NIC as it comes keeps its traffic on the host: another
	 * host's address (192.0.2.1 is not this host's) is unreachable. */
	rdma_create_id(ch, &c, NULL, RDMA_PS_TCP);
	if (rdma_resolve_addr(c, NULL, (struct sockaddr *)&far, 2000))
		FAIL("rdma_resolve_addr: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_ADDR_ERROR);
	if (ev->status >= 0)
		FAIL("ADDR_ERROR status %d", ev->status);
	rdma_ack_cm_event(ev);
	/* Nobody listens on base_port + 1: REJECTED, invalid service ID (8). */
	rdma_create_id(ch, &d, NULL, RDMA_PS_TCP);
	rdma_resolve_addr(d, NULL, (struct sockaddr *)&lo, 2000);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	rdma_resolve_route(d, 2000);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	{
		struct rdma_conn_param p = { .qp_num = 0x42, .retry_count = 7 };

		if (rdma_connect(d, &p))
			FAIL("rdma_connect: %s", strerror(errno));
	}
	ev = expect(ch, RDMA_CM_EVENT_REJECTED);
	if (ev->status != 8)
		FAIL("REJECTED status %d, want 8 (invalid service ID)", ev->status);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_id(c);
	rdma_destroy_id(d);
	rdma_destroy_event_channel(ch);
}

/* A QP for an ID (RC, small), through rdma_create_qp. */
static void make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	if (rdma_create_qp(id, NULL, &a))
		FAIL("rdma_create_qp: %s", strerror(errno));
	if (!id->qp || !id->send_cq || !id->recv_cq || !id->send_cq_channel)
		FAIL("rdma_create_qp left qp %p send_cq %p recv_cq %p", id->qp,
		     id->send_cq, id->recv_cq);
	if (id->qp->state != IBV_QPS_INIT)
		FAIL("a new connected QP is in state %d, want INIT", id->qp->state);
}

static void client_to(struct rdma_event_channel *ch, struct rdma_cm_id **out,
		      const char *pdata)
{
	struct sockaddr_in dst = sin4("127.0.0.1", base_port);
	struct rdma_conn_param p = { .private_data = pdata,
				     .private_data_len = strlen(pdata) + 1,
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7 };

	rdma_create_id(ch, out, NULL, RDMA_PS_TCP);
	rdma_resolve_addr(*out, NULL, (struct sockaddr *)&dst, 2000);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	rdma_resolve_route(*out, 2000);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	make_qp(*out);
	if (rdma_connect(*out, &p))
		FAIL("rdma_connect: %s", strerror(errno));
}

static void mode_connect(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *listen, *cli, *srv;
	struct rdma_cm_event *ev;
	struct sockaddr_in any = sin4("127.0.0.1", base_port);
	struct rdma_conn_param acc = { .private_data = "welcome",
				       .private_data_len = 8,
				       .responder_resources = 1,
				       .initiator_depth = 1,
				       .rnr_retry_count = 7 };
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;

	rdma_create_id(sch, &listen, (void *)0x5150, RDMA_PS_TCP);
	if (rdma_bind_addr(listen, (struct sockaddr *)&any) || rdma_listen(listen, 4))
		FAIL("bind/listen: %s", strerror(errno));
	if (!listen->verbs)
		FAIL("a bind to 127.0.0.1 did not attach the soft NIC");

	/* 1. Rejected with private data. */
	client_to(cch, &cli, "first");
	ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	if (ev->listen_id != listen || ev->id == listen ||
	    ev->id->context != (void *)0x5150)
		FAIL("CONNECT_REQUEST listen_id %p id %p", ev->listen_id, ev->id);
	if (ev->param.conn.private_data_len != 56 ||
	    strcmp(ev->param.conn.private_data, "first"))
		FAIL("REQ private data len %d", ev->param.conn.private_data_len);
	if (ev->param.conn.responder_resources != 1 || ev->param.conn.qp_num != cli->qp->qp_num)
		FAIL("REQ params: resp %d qpn 0x%x", ev->param.conn.responder_resources,
		     ev->param.conn.qp_num);
	srv = ev->id;
	if (rdma_reject(srv, "no thanks", 10))
		FAIL("rdma_reject: %s", strerror(errno));
	rdma_ack_cm_event(ev);
	ev = expect(cch, RDMA_CM_EVENT_REJECTED);
	if (ev->status != 28 || strcmp(ev->param.conn.private_data, "no thanks"))
		FAIL("REJECTED status %d", ev->status);
	rdma_ack_cm_event(ev);
	if (cli->qp->state != IBV_QPS_ERR)
		FAIL("a rejected ID's QP is in state %d, want ERR", cli->qp->state);
	rdma_destroy_id(srv);
	rdma_destroy_qp(cli);
	rdma_destroy_id(cli);

	/* 2. Accepted, then disconnected by the client. */
	client_to(cch, &cli, "second");
	ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	srv = ev->id;
	make_qp(srv);
	if (rdma_accept(srv, &acc))
		FAIL("rdma_accept: %s", strerror(errno));
	rdma_ack_cm_event(ev);
	ev = expect(cch, RDMA_CM_EVENT_ESTABLISHED);
	if (strcmp(ev->param.conn.private_data, "welcome") || ev->param.conn.qp_num != srv->qp->qp_num)
		FAIL("ESTABLISHED: REP private data / qpn 0x%x", ev->param.conn.qp_num);
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_ESTABLISHED));
	if (ibv_query_qp(cli->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qia) ||
	    qa.qp_state != IBV_QPS_RTS || qa.dest_qp_num != srv->qp->qp_num)
		FAIL("client QP state %d dest 0x%x", qa.qp_state, qa.dest_qp_num);
	if (ibv_query_qp(srv->qp, &qa, IBV_QP_STATE | IBV_QP_DEST_QPN, &qia) ||
	    qa.qp_state != IBV_QPS_RTS || qa.dest_qp_num != cli->qp->qp_num)
		FAIL("server QP state %d dest 0x%x", qa.qp_state, qa.dest_qp_num);
	if (rdma_disconnect(cli))
		FAIL("rdma_disconnect: %s", strerror(errno));
	rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_DISCONNECTED));
	if (rdma_disconnect(srv))
		FAIL("rdma_disconnect (answering): %s", strerror(errno));
	rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_DISCONNECTED));
	/* Timewait: 4.096 us * 2^19 (the QP's ACK timeout) later. */
	rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_TIMEWAIT_EXIT));
	rdma_ack_cm_event(expect(sch, RDMA_CM_EVENT_TIMEWAIT_EXIT));
	rdma_destroy_qp(cli);
	rdma_destroy_qp(srv);
	rdma_destroy_id(cli);
	rdma_destroy_id(srv);
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(sch);
	rdma_destroy_event_channel(cch);
}

static void mode_qpattr(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *listen, *cli, *srv;
	struct rdma_cm_event *ev;
	struct sockaddr_in any = sin4("0.0.0.0", base_port);
	struct ibv_qp_attr a;
	int mask;

	rdma_create_id(sch, &listen, NULL, RDMA_PS_TCP);
	rdma_bind_addr(listen, (struct sockaddr *)&any);
	rdma_listen(listen, 1);
	client_to(cch, &cli, "x");
	ev = expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
	srv = ev->id;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(srv, &a, &mask))
		FAIL("rdma_init_qp_attr RTR: %s", strerror(errno));
	if (!(mask & IBV_QP_AV) || !(mask & IBV_QP_DEST_QPN) || a.dest_qp_num != cli->qp->qp_num ||
	    !a.ah_attr.is_global || a.ah_attr.grh.dgid.raw[10] != 0xff || a.path_mtu < 3)
		FAIL("RTR attrs: mask 0x%x dest 0x%x", mask, a.dest_qp_num);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(srv, &a, &mask) || !(mask & IBV_QP_SQ_PSN) ||
	    a.timeout != 19 || a.retry_cnt != 7 || a.rnr_retry != 7)
		FAIL("RTS attrs: mask 0x%x timeout %d retry %d rnr %d", mask, a.timeout,
		     a.retry_cnt, a.rnr_retry);
	rdma_ack_cm_event(ev);
	rdma_reject(srv, NULL, 0);
	rdma_ack_cm_event(expect(cch, RDMA_CM_EVENT_REJECTED));
	rdma_destroy_id(srv);
	rdma_destroy_qp(cli);
	rdma_destroy_id(cli);
	rdma_destroy_id(listen);
}

/* rdma_create_ep endpoints: the passive side runs in a thread. The server
 * sends the address and rkey of a buffer; the client RDMA-WRITEs into it and
 * READs it back, then tells the server, which checks what was written. */
struct keys {
	uint64_t addr;
	uint32_t rkey;
	char text[20];
};
static char port_str[16];
static void *ep_server(void *arg)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 2, .max_recv_wr = 2,
						   .max_send_sge = 1, .max_recv_sge = 1 },
					 .sq_sig_all = 1 };
	struct rdma_cm_id *listen, *id;
	struct ibv_mr *mr, *tmr;
	struct ibv_wc wc;
	static char buf[64];
	static char target[64];
	struct keys k;

	(void)arg;
	if (rdma_getaddrinfo("127.0.0.1", port_str, &hints, &res))
		FAIL("server rdma_getaddrinfo: %s", strerror(errno));
	if (rdma_create_ep(&listen, res, NULL, &attr))
		FAIL("server rdma_create_ep: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	if (rdma_listen(listen, 1))
		FAIL("rdma_listen: %s", strerror(errno));
	if (rdma_get_request(listen, &id))
		FAIL("rdma_get_request: %s", strerror(errno));
	if (!id->qp)
		FAIL("rdma_get_request did not create the QP from rdma_create_ep's attributes");
	mr = rdma_reg_msgs(id, buf, sizeof buf);
	tmr = ibv_reg_mr(id->pd, target, sizeof target,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr || !tmr || rdma_post_recv(id, NULL, buf, sizeof buf, mr))
		FAIL("server setup: %s", strerror(errno));
	if (rdma_accept(id, NULL))
		FAIL("rdma_accept: %s", strerror(errno));
	k.addr = (uintptr_t)target;
	k.rkey = tmr->rkey;
	strcpy(k.text, "keys");
	memcpy(buf + 32, &k, sizeof k);
	if (rdma_post_send(id, NULL, buf + 32, sizeof k, mr, 0) ||
	    rdma_get_send_comp(id, &wc) != 1 || wc.status)
		FAIL("server send: %s", strerror(errno));
	if (rdma_get_recv_comp(id, &wc) != 1 || wc.status || strcmp(buf, "done"))
		FAIL("server: no 'done' (status %d, '%s')", wc.status, buf);
	if (strcmp(target, "written by the client"))
		FAIL("server buffer after the client's RDMA WRITE: '%s'", target);
	rdma_disconnect(id);
	rdma_dereg_mr(mr);
	ibv_dereg_mr(tmr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(listen);
	return NULL;
}

static void mode_ep(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 4, .max_recv_wr = 2,
						   .max_send_sge = 1, .max_recv_sge = 1 },
					 .sq_sig_all = 1 };
	struct rdma_cm_id *id;
	struct ibv_mr *mr, *wmr, *rmr;
	struct ibv_wc wc;
	struct keys k;
	pthread_t t;
	static char buf[64], out[64], back[64];

	snprintf(port_str, sizeof port_str, "%d", base_port);
	pthread_create(&t, NULL, ep_server, NULL);
	usleep(300000);
	if (rdma_getaddrinfo("127.0.0.1", port_str, &hints, &res))
		FAIL("client rdma_getaddrinfo: %s", strerror(errno));
	if (res->ai_qp_type != IBV_QPT_RC || !res->ai_dst_addr)
		FAIL("rdma_getaddrinfo: qp type %d", res->ai_qp_type);
	if (rdma_create_ep(&id, res, NULL, &attr))
		FAIL("client rdma_create_ep: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	mr = rdma_reg_msgs(id, buf, sizeof buf);
	wmr = rdma_reg_msgs(id, out, sizeof out);
	rmr = rdma_reg_read(id, back, sizeof back);
	if (!mr || !wmr || !rmr)
		FAIL("rdma_reg_*: %s", strerror(errno));
	if (rdma_post_recv(id, NULL, buf, sizeof buf, mr))
		FAIL("client recv: %s", strerror(errno));
	if (rdma_connect(id, NULL))
		FAIL("rdma_connect: %s", strerror(errno));
	if (rdma_get_recv_comp(id, &wc) != 1 || wc.status)
		FAIL("client recv completion: status %d", wc.status);
	memcpy(&k, buf, sizeof k);
	if (strcmp(k.text, "keys"))
		FAIL("client got '%s'", k.text);
	strcpy(out, "written by the client");
	if (rdma_post_write(id, NULL, out, strlen(out) + 1, wmr, 0, k.addr, k.rkey) ||
	    rdma_get_send_comp(id, &wc) != 1 || wc.status || wc.opcode != IBV_WC_RDMA_WRITE)
		FAIL("rdma_post_write: status %d", wc.status);
	if (rdma_post_read(id, NULL, back, strlen(out) + 1, rmr, 0, k.addr, k.rkey) ||
	    rdma_get_send_comp(id, &wc) != 1 || wc.status || wc.opcode != IBV_WC_RDMA_READ ||
	    strcmp(back, out))
		FAIL("rdma_post_read: status %d, read back '%s'", wc.status, back);
	strcpy(buf + 32, "done");
	if (rdma_post_send(id, NULL, buf + 32, 5, mr, 0) || rdma_get_send_comp(id, &wc) != 1 ||
	    wc.status)
		FAIL("client send");
	/* The server's synchronous rdma_disconnect waits for our DREP. */
	if (rdma_disconnect(id))
		FAIL("client rdma_disconnect: %s", strerror(errno));
	pthread_join(t, NULL);
	rdma_dereg_mr(mr);
	rdma_dereg_mr(wmr);
	rdma_dereg_mr(rmr);
	rdma_destroy_ep(id);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s MODE PORT\n", argv[0]);
		return 2;
	}
	base_port = atoi(argv[2]);
	if (!strcmp(argv[1], "channel"))
		mode_channel();
	else if (!strcmp(argv[1], "addr"))
		mode_addr();
	else if (!strcmp(argv[1], "errors"))
		mode_errors();
	else if (!strcmp(argv[1], "connect"))
		mode_connect();
	else if (!strcmp(argv[1], "qpattr"))
		mode_qpattr();
	else if (!strcmp(argv[1], "ep"))
		mode_ep();
	else {
		fprintf(stderr, "unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("ok %s\n", argv[1]);
	return 0;
}
