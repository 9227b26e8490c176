--
-- PostgreSQL database dump
--

\restrict Jtnoc0xKErrGhegEETXkPUZRwR4e34aX138ra0teIXm4pcFkljgTaEEATMWKKC5

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: exchange_staging_notify(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.exchange_staging_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            PERFORM pg_notify('exchange_staging', '');
            RETURN NULL;
        END
        $$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: aggregates; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.aggregates (
    id bigint NOT NULL,
    kind character varying(64) NOT NULL,
    aggregate character varying(200) NOT NULL,
    done_version bigint DEFAULT '0'::bigint NOT NULL,
    lease_token character varying(64),
    lease_owner character varying(200),
    lease_until timestamp without time zone,
    sku character varying(100),
    price_type character varying(100),
    sku_key character varying(300)
);


--
-- Name: aggregates_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.aggregates_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: aggregates_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.aggregates_id_seq OWNED BY public.aggregates.id;


--
-- Name: alembic_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);


--
-- Name: cml_catalog; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cml_catalog (
    id bigint NOT NULL,
    kind character varying(16) NOT NULL,
    key character varying(200) NOT NULL,
    name character varying(500),
    value character varying(200),
    updated_at timestamp without time zone NOT NULL,
    key_key character varying(600),
    value_key character varying(600)
);


--
-- Name: cml_catalog_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.cml_catalog_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: cml_catalog_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.cml_catalog_id_seq OWNED BY public.cml_catalog.id;


--
-- Name: cml_exchanges; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cml_exchanges (
    id bigint NOT NULL,
    exchange character varying(64) NOT NULL,
    filename character varying(500) NOT NULL,
    started_at timestamp without time zone NOT NULL,
    finished_at timestamp without time zone,
    outcome character varying(32),
    detail text,
    intents integer DEFAULT 0 NOT NULL,
    not_sent integer DEFAULT 0 NOT NULL,
    version bigint,
    heartbeat_at timestamp without time zone
);


--
-- Name: cml_exchanges_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.cml_exchanges_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: cml_exchanges_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.cml_exchanges_id_seq OWNED BY public.cml_exchanges.id;


--
-- Name: cml_package_repeats; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cml_package_repeats (
    version bigint NOT NULL,
    aggregate character varying(200) NOT NULL,
    payload text NOT NULL
);


--
-- Name: cml_packages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.cml_packages (
    id bigint NOT NULL,
    digest character varying(64) NOT NULL,
    version bigint NOT NULL,
    source_ref character varying(500) NOT NULL,
    intents integer NOT NULL,
    staged_at timestamp without time zone NOT NULL,
    messages_mark bigint,
    formed_at character varying(32),
    exchange character varying(64)
);


--
-- Name: cml_packages_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.cml_packages_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: cml_packages_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.cml_packages_id_seq OWNED BY public.cml_packages.id;


--
-- Name: delivery_pause; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.delivery_pause (
    name character varying(32) NOT NULL,
    operator character varying(100) NOT NULL,
    note text NOT NULL,
    paused_at timestamp without time zone NOT NULL
);


--
-- Name: http_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.http_keys (
    name character varying(64) NOT NULL,
    value character varying(200) NOT NULL,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: message_history; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.message_history (
    id bigint NOT NULL,
    message_pk bigint NOT NULL,
    at timestamp without time zone NOT NULL,
    event character varying(32) NOT NULL,
    from_state character varying(16),
    to_state character varying(16),
    worker character varying(200),
    attempt integer,
    http_status integer,
    error_class character varying(100),
    detail text,
    delay_s double precision,
    operator character varying(200),
    note text,
    leased_at timestamp without time zone,
    lease_until timestamp without time zone
);


--
-- Name: message_history_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.message_history_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: message_history_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.message_history_id_seq OWNED BY public.message_history.id;


--
-- Name: messages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.messages (
    id bigint NOT NULL,
    message_id character varying(200) NOT NULL,
    aggregate_id bigint,
    rejected boolean DEFAULT false NOT NULL,
    kind character varying(64) NOT NULL,
    aggregate character varying(200) NOT NULL,
    version bigint NOT NULL,
    schema_version character varying(32) NOT NULL,
    payload text NOT NULL,
    source_ref character varying(500),
    created_at timestamp without time zone NOT NULL,
    staging_id bigint,
    taken_at timestamp without time zone NOT NULL,
    state character varying(16) NOT NULL,
    reason character varying(64),
    superseded_by character varying(200),
    attempts integer DEFAULT 0 NOT NULL,
    next_try_at timestamp without time zone,
    locked_by character varying(200),
    locked_until timestamp without time zone,
    lease_token character varying(64),
    last_status integer,
    last_error text,
    receipt text,
    waiting_since timestamp without time zone NOT NULL,
    updated_at timestamp without time zone NOT NULL,
    leased_at timestamp without time zone,
    claim_rank bigint DEFAULT '0'::bigint NOT NULL,
    name character varying(500),
    message_id_key character varying(200),
    aggregate_key character varying(600)
);


--
-- Name: messages_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.messages_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: messages_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.messages_id_seq OWNED BY public.messages.id;


--
-- Name: notifications; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.notifications (
    name character varying(32) NOT NULL,
    version integer NOT NULL,
    attempted_at timestamp without time zone,
    quarantine_mark timestamp without time zone,
    stops character varying(200) NOT NULL,
    sent_by character varying(200),
    outcome character varying(500)
);


--
-- Name: operator_sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.operator_sessions (
    id character varying(64) NOT NULL,
    name character varying(100) NOT NULL,
    credential character varying(64) NOT NULL,
    created_at timestamp without time zone NOT NULL,
    expires_at timestamp without time zone NOT NULL
);


--
-- Name: operators; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.operators (
    name character varying(100) NOT NULL,
    role character varying(16) NOT NULL,
    password_hash character varying(200) NOT NULL,
    created_at timestamp without time zone NOT NULL
);


--
-- Name: price_owners; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.price_owners (
    sku character varying(100) NOT NULL,
    price_type character varying(100) NOT NULL,
    aggregate character varying(200) NOT NULL
);


--
-- Name: shop_sku_ids; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.shop_sku_ids (
    shop character varying(200) NOT NULL,
    sku character varying(200) NOT NULL,
    product_id bigint NOT NULL,
    parent_id bigint,
    updated_at timestamp without time zone NOT NULL
);


--
-- Name: sign_in_refusals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sign_in_refusals (
    id bigint NOT NULL,
    door character varying(16) NOT NULL,
    count integer NOT NULL,
    first_at timestamp without time zone,
    last_at timestamp without time zone,
    succeeded_at timestamp without time zone
);


--
-- Name: sign_in_refusals_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.sign_in_refusals_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: sign_in_refusals_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.sign_in_refusals_id_seq OWNED BY public.sign_in_refusals.id;


--
-- Name: staging_intents; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.staging_intents (
    id bigint NOT NULL,
    kind character varying(64) NOT NULL,
    aggregate character varying(200) NOT NULL,
    aggregate_version bigint NOT NULL,
    payload text NOT NULL,
    schema_version character varying(32) DEFAULT '1'::character varying NOT NULL,
    source_ref character varying(500),
    created_at timestamp without time zone DEFAULT (now() AT TIME ZONE 'utc'::text) NOT NULL,
    taken_at timestamp without time zone,
    name character varying(500)
);


--
-- Name: staging_intents_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.staging_intents ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.staging_intents_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: target_locks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.target_locks (
    name character varying(200) NOT NULL,
    holder character varying(200),
    until timestamp without time zone NOT NULL
);


--
-- Name: workers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workers (
    worker_id character varying(200) NOT NULL,
    started_at timestamp without time zone NOT NULL,
    heartbeat_at timestamp without time zone NOT NULL,
    paused_reason text,
    breaker_state character varying(16) DEFAULT 'closed'::character varying NOT NULL,
    breaker_until timestamp without time zone,
    pace text,
    stopped_at timestamp without time zone,
    source text,
    paused_at timestamp without time zone,
    unreachable_since timestamp without time zone,
    pause_cause character varying(32)
);


--
-- Name: aggregates id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.aggregates ALTER COLUMN id SET DEFAULT nextval('public.aggregates_id_seq'::regclass);


--
-- Name: cml_catalog id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_catalog ALTER COLUMN id SET DEFAULT nextval('public.cml_catalog_id_seq'::regclass);


--
-- Name: cml_exchanges id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_exchanges ALTER COLUMN id SET DEFAULT nextval('public.cml_exchanges_id_seq'::regclass);


--
-- Name: cml_packages id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_packages ALTER COLUMN id SET DEFAULT nextval('public.cml_packages_id_seq'::regclass);


--
-- Name: message_history id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.message_history ALTER COLUMN id SET DEFAULT nextval('public.message_history_id_seq'::regclass);


--
-- Name: messages id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages ALTER COLUMN id SET DEFAULT nextval('public.messages_id_seq'::regclass);


--
-- Name: sign_in_refusals id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sign_in_refusals ALTER COLUMN id SET DEFAULT nextval('public.sign_in_refusals_id_seq'::regclass);


--
-- Data for Name: aggregates; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.aggregates (id, kind, aggregate, done_version, lease_token, lease_owner, lease_until, sku, price_type, sku_key) FROM stdin;
18	financial_posting	DOC-Q	0	\N	\N	\N	\N	\N	\N
17	financial_posting	DOC-A	3	\N	\N	\N	\N	\N	\N
2	price	GONE-1	0	\N	\N	\N	GONE-1	retail	gone-1
3	price	GONE-2	0	\N	\N	\N	GONE-2	retail	gone-2
4	price	GONE-3	0	\N	\N	\N	GONE-3	retail	gone-3
5	price	P-001	2	\N	\N	\N	P-001	retail	p-001
6	price	P-002	2	\N	\N	\N	P-002	retail	p-002
7	price	P-003	2	\N	\N	\N	P-003	retail	p-003
8	price	P-004	2	\N	\N	\N	P-004	retail	p-004
9	price	P-005	1	\N	\N	\N	P-005	retail	p-005
10	price	P-006	1	\N	\N	\N	P-006	retail	p-006
11	price	P-007	1	\N	\N	\N	P-007	retail	p-007
12	price	P-008	1	\N	\N	\N	P-008	retail	p-008
13	price	P-009	1	\N	\N	\N	P-009	retail	p-009
14	price	P-010	1	\N	\N	\N	P-010	retail	p-010
15	price	P-011	1	\N	\N	\N	P-011	retail	p-011
16	price	P-012	1	\N	\N	\N	P-012	retail	p-012
19	price	C-1/retail	4	\N	\N	\N	C-1	retail	c-1
20	price	C-2/retail	3	\N	\N	\N	C-2	retail	c-2
21	price	C-3/retail	3	\N	\N	\N	C-3	retail	c-3
22	price	C-4/retail	3	\N	\N	\N	C-4	retail	c-4
23	price	C-5/retail	3	\N	\N	\N	C-5	retail	c-5
24	price	STALE-1	2	\N	\N	\N	STALE-1	retail	stale-1
1	price	BUSY-1	0	\N	\N	\N	BUSY-1	retail	busy-1
25	financial_posting	DOC-GAP	1	\N	\N	\N	\N	\N	\N
26	price	LEASE-1	0	2f2e219c16a64d484af1f3dc55674a10	fixture-worker-2	2036-11-28 09:12:00	LEASE-1	retail	lease-1
\.


--
-- Data for Name: alembic_version; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.alembic_version (version_num) FROM stdin;
0023
\.


--
-- Data for Name: cml_catalog; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.cml_catalog (id, kind, key, name, value, updated_at, key_key, value_key) FROM stdin;
1	price_type	t-retail	Розничная	руб	2026-12-05 07:40:15.359864	t-retail	руб
\.


--
-- Data for Name: cml_exchanges; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.cml_exchanges (id, exchange, filename, started_at, finished_at, outcome, detail, intents, not_sent, version, heartbeat_at) FROM stdin;
\.


--
-- Data for Name: cml_package_repeats; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.cml_package_repeats (version, aggregate, payload) FROM stdin;
\.


--
-- Data for Name: cml_packages; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.cml_packages (id, digest, version, source_ref, intents, staged_at, messages_mark, formed_at, exchange) FROM stdin;
1	d87d17fee45b6be93795752f049d00470a8270cdf71d96d0a907337a9ad1efbf	3	1C exchange offers_1.xml 2026-12-01T10:00:00	5	2026-12-05 07:40:15.319567	26	2026-12-01T10:00:00	\N
2	436a819cd341f6ef78c7a0d3f1c3edf227e28ef6d4d891cdf26b01a0c9d5d379	4	1C exchange offers_2.xml 2026-12-01T10:00:00	1	2026-12-05 07:40:15.355727	26	2026-12-01T10:00:00	\N
\.


--
-- Data for Name: delivery_pause; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.delivery_pause (name, operator, note, paused_at) FROM stdin;
delivery	fixture-operator	site maintenance	2026-12-01 09:12:00
\.


--
-- Data for Name: http_keys; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.http_keys (name, value, created_at) FROM stdin;
\.


--
-- Data for Name: message_history; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.message_history (id, message_pk, at, event, from_state, to_state, worker, attempt, http_status, error_class, detail, delay_s, operator, note, leased_at, lease_until) FROM stdin;
1	1	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #1	\N	\N	\N	\N	\N
2	2	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #2	\N	\N	\N	\N	\N
3	3	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #3	\N	\N	\N	\N	\N
4	4	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #4	\N	\N	\N	\N	\N
5	5	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #5	\N	\N	\N	\N	\N
6	6	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #6	\N	\N	\N	\N	\N
7	7	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #7	\N	\N	\N	\N	\N
8	8	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #8	\N	\N	\N	\N	\N
9	9	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #9	\N	\N	\N	\N	\N
10	10	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #10	\N	\N	\N	\N	\N
11	11	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #11	\N	\N	\N	\N	\N
12	12	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #12	\N	\N	\N	\N	\N
13	13	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #13	\N	\N	\N	\N	\N
14	14	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #14	\N	\N	\N	\N	\N
15	15	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #15	\N	\N	\N	\N	\N
16	16	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #16	\N	\N	\N	\N	\N
17	17	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #17	\N	\N	\N	\N	\N
18	18	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #18	\N	\N	\N	\N	\N
19	19	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #19	\N	\N	\N	\N	\N
20	20	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #20	\N	\N	\N	\N	\N
21	21	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #21	\N	\N	\N	\N	\N
22	22	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #23	\N	\N	\N	\N	\N
23	23	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #24	\N	\N	\N	\N	\N
24	24	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #25	\N	\N	\N	\N	\N
25	25	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #26	\N	\N	\N	\N	\N
26	26	2026-12-01 09:00:00	rejected	\N	quarantined	\N	\N	\N	\N	invalid-contract: price payload: price: must be a plain decimal such as "840.00" (ASCII digits and at most one point; no spaces, line breaks, '+' or other characters), not 'дорого'	\N	\N	\N	\N	\N
27	1	2026-12-01 09:00:00	superseded	new	cancelled	\N	\N	\N	\N	superseded by price.P-001.v2.9af862be383f4c4fcd25b4ad	\N	\N	\N	\N	\N
28	2	2026-12-01 09:00:00	superseded	new	cancelled	\N	\N	\N	\N	superseded by price.P-002.v2.1d123212ae421cddc689a843	\N	\N	\N	\N	\N
29	3	2026-12-01 09:00:00	superseded	new	cancelled	\N	\N	\N	\N	superseded by price.P-003.v2.27adc1831c0d1a8956c63997	\N	\N	\N	\N	\N
30	4	2026-12-01 09:00:00	superseded	new	cancelled	\N	\N	\N	\N	superseded by price.P-004.v2.4ff88354373de1ae7dc0fdb3	\N	\N	\N	\N	\N
31	5	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
32	6	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
33	7	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
34	8	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
35	9	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
36	10	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
37	11	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
38	12	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
39	13	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
40	14	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
41	15	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
42	16	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
43	17	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
44	22	2026-12-01 09:00:00	retry-scheduled	in_progress	delayed	fixture-worker-1	1	503	\N	HTTP 503: {"error":"busy"}	44.20169063271162	\N	\N	2026-12-01 09:00:00	\N
45	23	2026-12-01 09:00:00	quarantined	in_progress	quarantined	fixture-worker-1	1	404	\N	HTTP 404: {"error":"unknown-sku","sku":"GONE-1"}	\N	\N	\N	2026-12-01 09:00:00	\N
46	24	2026-12-01 09:00:00	quarantined	in_progress	quarantined	fixture-worker-1	1	404	\N	HTTP 404: {"error":"unknown-sku","sku":"GONE-2"}	\N	\N	\N	2026-12-01 09:00:00	\N
47	25	2026-12-01 09:00:00	quarantined	in_progress	quarantined	fixture-worker-1	1	404	\N	HTTP 404: {"error":"unknown-sku","sku":"GONE-3"}	\N	\N	\N	2026-12-01 09:00:00	\N
48	18	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
49	19	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
50	27	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #27	\N	\N	\N	\N	\N
51	28	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #28	\N	\N	\N	\N	\N
52	29	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #29	\N	\N	\N	\N	\N
53	30	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #30	\N	\N	\N	\N	\N
54	31	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #31	\N	\N	\N	\N	\N
55	32	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #32	\N	\N	\N	\N	\N
56	27	2026-12-01 09:00:00	superseded	new	cancelled	\N	\N	\N	\N	superseded by price.C-1_retail.v4.94f0dbb0257f7adf946fd84d	\N	\N	\N	\N	\N
57	28	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
58	29	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
59	30	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
60	31	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
61	32	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
62	33	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #33	\N	\N	\N	\N	\N
63	33	2026-12-01 09:00:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:00:00	\N
64	34	2026-12-01 09:00:00	taken	\N	new	\N	\N	\N	\N	from staging row #34	\N	\N	\N	\N	\N
65	34	2026-12-01 09:00:00	stale	new	cancelled	\N	\N	\N	\N	version 1 is at or below version 2, already delivered: never sent	\N	\N	\N	\N	\N
66	20	2026-12-01 09:11:00	sequence-gap	new	quarantined	\N	\N	\N	\N	version 1 never arrived within 600 s	\N	\N	\N	\N	\N
67	22	2026-12-01 09:11:00	retry-scheduled	in_progress	delayed	fixture-worker-1	2	503	\N	HTTP 503: {"error":"busy"}	404.6358998888488	\N	\N	2026-12-01 09:11:00	\N
68	35	2026-12-01 09:11:00	taken	\N	new	\N	\N	\N	\N	from staging row #35	\N	\N	\N	\N	\N
69	36	2026-12-01 09:11:00	taken	\N	new	\N	\N	\N	\N	from staging row #36	\N	\N	\N	\N	\N
73	25	2026-12-01 09:12:00	operator-retry	quarantined	new	\N	\N	\N	\N	retried by fixture-operator (was http-404)	\N	fixture-operator	added to the shop	\N	\N
70	35	2026-12-01 09:11:00	delivered	in_progress	delivered	fixture-worker-1	1	200	\N	HTTP 200	\N	\N	\N	2026-12-01 09:11:00	\N
71	24	2026-12-01 09:11:00	operator-cancel	quarantined	cancelled	\N	\N	\N	\N	cancelled by fixture-operator (was http-404)	\N	fixture-operator	removed from the catalogue	\N	\N
72	37	2026-12-01 09:12:00	taken	\N	new	\N	\N	\N	\N	from staging row #37	\N	\N	\N	\N	\N
\.


--
-- Data for Name: messages; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.messages (id, message_id, aggregate_id, rejected, kind, aggregate, version, schema_version, payload, source_ref, created_at, staging_id, taken_at, state, reason, superseded_by, attempts, next_try_at, locked_by, locked_until, lease_token, last_status, last_error, receipt, waiting_since, updated_at, leased_at, claim_rank, name, message_id_key, aggregate_key) FROM stdin;
21	financial_posting.DOC-Q.v3.48910885702cd3e92f780ae2	18	f	financial_posting	DOC-Q	3	1	{"amount":"10.00","document":"DOC-Q","line":3}	Реализация DOC-Q	2026-12-05 07:40:14.671004	21	2026-12-01 09:00:00	new	\N	\N	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	20	\N	financial_posting.doc-q.v3.48910885702cd3e92f780ae2	doc-q
5	price.P-005.v1.df048aa9f0b09b6904afa5af	9	f	price	P-005	1	1	{"currency":"RUB","price":"104.00","price_type":"retail","sku":"P-005"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	5	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-1	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	4	\N	price.p-005.v1.df048aa9f0b09b6904afa5af	p-005
6	price.P-006.v1.7a324e71bde17672bea73447	10	f	price	P-006	1	1	{"currency":"RUB","price":"105.00","price_type":"retail","sku":"P-006"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	6	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-2	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	5	\N	price.p-006.v1.7a324e71bde17672bea73447	p-006
7	price.P-007.v1.0cb88c9d7e3e0b25fcd03baa	11	f	price	P-007	1	1	{"currency":"RUB","price":"106.00","price_type":"retail","sku":"P-007"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	7	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-3	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	6	\N	price.p-007.v1.0cb88c9d7e3e0b25fcd03baa	p-007
18	financial_posting.DOC-A.v2.3cf1c95c584624365985e4b1	17	f	financial_posting	DOC-A	2	1	{"amount":"20.00","document":"DOC-A","line":2}	Реализация DOC-A	2026-12-05 07:40:14.66711	18	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-14	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	17	\N	financial_posting.doc-a.v2.3cf1c95c584624365985e4b1	doc-a
19	financial_posting.DOC-A.v3.5def3ef84d7314a56750222c	17	f	financial_posting	DOC-A	3	1	{"amount":"30.00","document":"DOC-A","line":3}	Реализация DOC-A	2026-12-05 07:40:14.66711	19	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-15	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	18	\N	financial_posting.doc-a.v3.5def3ef84d7314a56750222c	doc-a
20	financial_posting.DOC-Q.v2.21a6ba4281ab438391698ba3	18	f	financial_posting	DOC-Q	2	1	{"amount":"10.00","document":"DOC-Q","line":2}	Реализация DOC-Q	2026-12-05 07:40:14.671004	20	2026-12-01 09:00:00	quarantined	sequence-gap	\N	0	\N	\N	\N	\N	\N	version 1 never arrived within 600 s	\N	2026-12-01 09:00:00	2026-12-01 09:11:00	\N	19	\N	financial_posting.doc-q.v2.21a6ba4281ab438391698ba3	doc-q
26	rejected-22	\N	t	price	BAD-1	1	1	{"sku": "BAD-1", "price": "дорого"}	\N	2026-12-05 07:40:14.675332	22	2026-12-01 09:00:00	quarantined	invalid-contract	\N	0	\N	\N	\N	\N	\N	price payload: price: must be a plain decimal such as "840.00" (ASCII digits and at most one point; no spaces, line breaks, '+' or other characters), not 'дорого'	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	0	\N	rejected-22	bad-1
1	price.P-001.v1.774ff0106eacde4187ebcc71	5	f	price	P-001	1	1	{"currency":"RUB","price":"100.00","price_type":"retail","sku":"P-001"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	1	2026-12-01 09:00:00	cancelled	superseded	price.P-001.v2.9af862be383f4c4fcd25b4ad	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	0	\N	price.p-001.v1.774ff0106eacde4187ebcc71	p-001
2	price.P-002.v1.8fa78d127cf28d37d466eec4	6	f	price	P-002	1	1	{"currency":"RUB","price":"101.00","price_type":"retail","sku":"P-002"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2	2026-12-01 09:00:00	cancelled	superseded	price.P-002.v2.1d123212ae421cddc689a843	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	1	\N	price.p-002.v1.8fa78d127cf28d37d466eec4	p-002
3	price.P-003.v1.0820b039accdf651affe8bf8	7	f	price	P-003	1	1	{"currency":"RUB","price":"102.00","price_type":"retail","sku":"P-003"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	3	2026-12-01 09:00:00	cancelled	superseded	price.P-003.v2.27adc1831c0d1a8956c63997	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	2	\N	price.p-003.v1.0820b039accdf651affe8bf8	p-003
4	price.P-004.v1.fc055ca5c3d544e367d02656	8	f	price	P-004	1	1	{"currency":"RUB","price":"103.00","price_type":"retail","sku":"P-004"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	4	2026-12-01 09:00:00	cancelled	superseded	price.P-004.v2.4ff88354373de1ae7dc0fdb3	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	3	\N	price.p-004.v1.fc055ca5c3d544e367d02656	p-004
8	price.P-008.v1.ad50c54afbf33f0c8481a308	12	f	price	P-008	1	1	{"currency":"RUB","price":"107.00","price_type":"retail","sku":"P-008"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	8	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-4	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	7	\N	price.p-008.v1.ad50c54afbf33f0c8481a308	p-008
9	price.P-009.v1.33af0fab71cc2c25729eaf26	13	f	price	P-009	1	1	{"currency":"RUB","price":"108.00","price_type":"retail","sku":"P-009"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	9	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-5	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	8	\N	price.p-009.v1.33af0fab71cc2c25729eaf26	p-009
10	price.P-010.v1.6a2caa2f6ef1c8cc11d21299	14	f	price	P-010	1	1	{"currency":"RUB","price":"109.00","price_type":"retail","sku":"P-010"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	10	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-6	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	9	\N	price.p-010.v1.6a2caa2f6ef1c8cc11d21299	p-010
11	price.P-011.v1.7e9fa691f8952be80e7319c1	15	f	price	P-011	1	1	{"currency":"RUB","price":"110.00","price_type":"retail","sku":"P-011"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	11	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-7	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	10	\N	price.p-011.v1.7e9fa691f8952be80e7319c1	p-011
12	price.P-012.v1.af61b2afe66ed416cac6b0e7	16	f	price	P-012	1	1	{"currency":"RUB","price":"111.00","price_type":"retail","sku":"P-012"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	12	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-8	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	11	\N	price.p-012.v1.af61b2afe66ed416cac6b0e7	p-012
13	price.P-001.v2.9af862be383f4c4fcd25b4ad	5	f	price	P-001	2	1	{"currency":"RUB","price":"200.50","price_type":"retail","sku":"P-001"}	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	13	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-9	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	12	\N	price.p-001.v2.9af862be383f4c4fcd25b4ad	p-001
14	price.P-002.v2.1d123212ae421cddc689a843	6	f	price	P-002	2	1	{"currency":"RUB","price":"201.50","price_type":"retail","sku":"P-002"}	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	14	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-10	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	13	\N	price.p-002.v2.1d123212ae421cddc689a843	p-002
15	price.P-003.v2.27adc1831c0d1a8956c63997	7	f	price	P-003	2	1	{"currency":"RUB","price":"202.50","price_type":"retail","sku":"P-003"}	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	15	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-11	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	14	\N	price.p-003.v2.27adc1831c0d1a8956c63997	p-003
16	price.P-004.v2.4ff88354373de1ae7dc0fdb3	8	f	price	P-004	2	1	{"currency":"RUB","price":"203.50","price_type":"retail","sku":"P-004"}	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	16	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-12	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	15	\N	price.p-004.v2.4ff88354373de1ae7dc0fdb3	p-004
17	financial_posting.DOC-A.v1.2bbc590de73eaac17ef50068	17	f	financial_posting	DOC-A	1	1	{"amount":"10.00","document":"DOC-A","line":1}	Реализация DOC-A	2026-12-05 07:40:14.66711	17	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-13	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	16	\N	financial_posting.doc-a.v1.2bbc590de73eaac17ef50068	doc-a
23	price.GONE-1.v1.6bca07b2a272f221881eedac	2	f	price	GONE-1	1	1	{"currency":"RUB","price":"100.00","price_type":"retail","sku":"GONE-1"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	24	2026-12-01 09:00:00	quarantined	http-404	\N	1	\N	\N	\N	\N	404	HTTP 404: {"error":"unknown-sku","sku":"GONE-1"}	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	23	\N	price.gone-1.v1.6bca07b2a272f221881eedac	gone-1
27	price.C-1_retail.v3.09b514fc68c5951d67534b21	19	f	price	C-1/retail	3	1	{"currency":"RUB","price":"300.00","price_type":"retail","sku":"C-1"}	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	27	2026-12-01 09:00:00	cancelled	superseded	price.C-1_retail.v4.94f0dbb0257f7adf946fd84d	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	0	Товар	price.c-1_retail.v3.09b514fc68c5951d67534b21	c-1/retail
28	price.C-2_retail.v3.5e561dda28758ee5c3f15d90	20	f	price	C-2/retail	3	1	{"currency":"RUB","price":"301.00","price_type":"retail","sku":"C-2"}	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	28	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-16	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	1	Товар	price.c-2_retail.v3.5e561dda28758ee5c3f15d90	c-2/retail
29	price.C-3_retail.v3.e7842bcf08cbbd29a255f7f6	21	f	price	C-3/retail	3	1	{"currency":"RUB","price":"302.00","price_type":"retail","sku":"C-3"}	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	29	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-17	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	2	Товар	price.c-3_retail.v3.e7842bcf08cbbd29a255f7f6	c-3/retail
22	price.BUSY-1.v1.2f9e66531948c8b6a49d7c4e	1	f	price	BUSY-1	1	1	{"currency":"RUB","price":"100.00","price_type":"retail","sku":"BUSY-1"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	23	2026-12-01 09:00:00	delayed	\N	\N	2	2026-12-01 09:17:44.6359	\N	\N	\N	503	HTTP 503: {"error":"busy"}	\N	2026-12-01 09:00:00	2026-12-01 09:11:00	2026-12-01 09:11:00	22	\N	price.busy-1.v1.2f9e66531948c8b6a49d7c4e	busy-1
24	price.GONE-2.v1.5a7975712468386c9d729e67	3	f	price	GONE-2	1	1	{"currency":"RUB","price":"100.00","price_type":"retail","sku":"GONE-2"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	25	2026-12-01 09:00:00	cancelled	operator	\N	1	\N	\N	\N	\N	404	HTTP 404: {"error":"unknown-sku","sku":"GONE-2"}	\N	2026-12-01 09:00:00	2026-12-01 09:11:00	2026-12-01 09:00:00	24	\N	price.gone-2.v1.5a7975712468386c9d729e67	gone-2
37	price.LEASE-1.v1.484ad85477e97059d0f7f725	26	f	price	LEASE-1	1	1	{"currency":"RUB","price":"77.00","price_type":"retail","sku":"LEASE-1"}	Установка цен номенклатуры 000001	2026-12-05 07:40:17.334346	37	2026-12-01 09:12:00	in_progress	\N	\N	1	\N	fixture-worker-2	2036-11-28 09:12:00	2f2e219c16a64d484af1f3dc55674a10	\N	\N	\N	2026-12-01 09:12:00	2026-12-01 09:12:00	2026-12-01 09:12:00	0	\N	price.lease-1.v1.484ad85477e97059d0f7f725	lease-1
25	price.GONE-3.v1.5099f3fa0edcd2c31a809c65	4	f	price	GONE-3	1	1	{"currency":"RUB","price":"100.00","price_type":"retail","sku":"GONE-3"}	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	26	2026-12-01 09:00:00	new	\N	\N	0	\N	\N	\N	\N	404	HTTP 404: {"error":"unknown-sku","sku":"GONE-3"}	\N	2026-12-01 09:12:00	2026-12-01 09:12:00	2026-12-01 09:00:00	25	\N	price.gone-3.v1.5099f3fa0edcd2c31a809c65	gone-3
30	price.C-4_retail.v3.326cf251ce3be9f01530e101	22	f	price	C-4/retail	3	1	{"currency":"RUB","price":"303.00","price_type":"retail","sku":"C-4"}	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	30	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-18	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	3	Товар	price.c-4_retail.v3.326cf251ce3be9f01530e101	c-4/retail
31	price.C-5_retail.v3.286b5f142a8bbbace47b71eb	23	f	price	C-5/retail	3	1	{"currency":"RUB","price":"304.00","price_type":"retail","sku":"C-5"}	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	31	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-19	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	4	Товар	price.c-5_retail.v3.286b5f142a8bbbace47b71eb	c-5/retail
32	price.C-1_retail.v4.94f0dbb0257f7adf946fd84d	19	f	price	C-1/retail	4	1	{"currency":"RUB","price":"399.00","price_type":"retail","sku":"C-1"}	1C exchange offers_2.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.342948	32	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-20	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	5	Товар	price.c-1_retail.v4.94f0dbb0257f7adf946fd84d	c-1/retail
33	price.STALE-1.v2.e45d2d41c70fc5e8ce2fa4f9	24	f	price	STALE-1	2	1	{"currency":"RUB","price":"50.00","price_type":"retail","sku":"STALE-1"}	Установка цен номенклатуры 000002	2026-12-05 07:40:15.603383	33	2026-12-01 09:00:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-21	2026-12-01 09:00:00	2026-12-01 09:00:00	2026-12-01 09:00:00	0	\N	price.stale-1.v2.e45d2d41c70fc5e8ce2fa4f9	stale-1
34	price.STALE-1.v1.473f74e07077be443991c7f4	24	f	price	STALE-1	1	1	{"currency":"RUB","price":"40.00","price_type":"retail","sku":"STALE-1"}	Установка цен номенклатуры 000001	2026-12-05 07:40:16.111632	34	2026-12-01 09:00:00	cancelled	stale	\N	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:00:00	2026-12-01 09:00:00	\N	0	\N	price.stale-1.v1.473f74e07077be443991c7f4	stale-1
36	financial_posting.DOC-GAP.v3.dcd49e4483fcfcc4e75b651e	25	f	financial_posting	DOC-GAP	3	1	{"amount":"10.00","document":"DOC-GAP","line":3}	Реализация DOC-GAP	2026-12-05 07:40:16.858065	36	2026-12-01 09:11:00	new	\N	\N	0	\N	\N	\N	\N	\N	\N	\N	2026-12-01 09:11:00	2026-12-01 09:11:00	\N	1	\N	financial_posting.doc-gap.v3.dcd49e4483fcfcc4e75b651e	doc-gap
35	financial_posting.DOC-GAP.v1.5b899f8ff9e18c28fd33293f	25	f	financial_posting	DOC-GAP	1	1	{"amount":"10.00","document":"DOC-GAP","line":1}	Реализация DOC-GAP	2026-12-05 07:40:16.858065	35	2026-12-01 09:11:00	delivered	\N	\N	1	\N	\N	\N	\N	200	\N	R-22	2026-12-01 09:11:00	2026-12-01 09:11:00	2026-12-01 09:11:00	0	\N	financial_posting.doc-gap.v1.5b899f8ff9e18c28fd33293f	doc-gap
\.


--
-- Data for Name: notifications; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.notifications (name, version, attempted_at, quarantine_mark, stops, sent_by, outcome) FROM stdin;
\.


--
-- Data for Name: operator_sessions; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.operator_sessions (id, name, credential, created_at, expires_at) FROM stdin;
\.


--
-- Data for Name: operators; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.operators (name, role, password_hash, created_at) FROM stdin;
\.


--
-- Data for Name: price_owners; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.price_owners (sku, price_type, aggregate) FROM stdin;
BUSY-1	retail	BUSY-1
GONE-1	retail	GONE-1
GONE-2	retail	GONE-2
GONE-3	retail	GONE-3
P-001	retail	P-001
P-002	retail	P-002
P-003	retail	P-003
P-004	retail	P-004
P-005	retail	P-005
P-006	retail	P-006
P-007	retail	P-007
P-008	retail	P-008
P-009	retail	P-009
P-010	retail	P-010
P-011	retail	P-011
P-012	retail	P-012
C-1	retail	C-1/retail
C-2	retail	C-2/retail
C-3	retail	C-3/retail
C-4	retail	C-4/retail
C-5	retail	C-5/retail
STALE-1	retail	STALE-1
LEASE-1	retail	LEASE-1
\.


--
-- Data for Name: shop_sku_ids; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.shop_sku_ids (shop, sku, product_id, parent_id, updated_at) FROM stdin;
\.


--
-- Data for Name: sign_in_refusals; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.sign_in_refusals (id, door, count, first_at, last_at, succeeded_at) FROM stdin;
\.


--
-- Data for Name: staging_intents; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.staging_intents (id, kind, aggregate, aggregate_version, payload, schema_version, source_ref, created_at, taken_at, name) FROM stdin;
1	price	P-001	1	{"sku": "P-001", "price": "100.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
2	price	P-002	1	{"sku": "P-002", "price": "101.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
3	price	P-003	1	{"sku": "P-003", "price": "102.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
4	price	P-004	1	{"sku": "P-004", "price": "103.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
5	price	P-005	1	{"sku": "P-005", "price": "104.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
6	price	P-006	1	{"sku": "P-006", "price": "105.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
7	price	P-007	1	{"sku": "P-007", "price": "106.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
8	price	P-008	1	{"sku": "P-008", "price": "107.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
9	price	P-009	1	{"sku": "P-009", "price": "108.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
10	price	P-010	1	{"sku": "P-010", "price": "109.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
11	price	P-011	1	{"sku": "P-011", "price": "110.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
12	price	P-012	1	{"sku": "P-012", "price": "111.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.654206	2026-12-01 09:00:00	\N
13	price	P-001	2	{"sku": "P-001", "price": "200.50", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	2026-12-01 09:00:00	\N
14	price	P-002	2	{"sku": "P-002", "price": "201.50", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	2026-12-01 09:00:00	\N
15	price	P-003	2	{"sku": "P-003", "price": "202.50", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	2026-12-01 09:00:00	\N
16	price	P-004	2	{"sku": "P-004", "price": "203.50", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000002	2026-12-05 07:40:14.66328	2026-12-01 09:00:00	\N
17	financial_posting	DOC-A	1	{"document": "DOC-A", "line": 1, "amount": "10.00"}	1	Реализация DOC-A	2026-12-05 07:40:14.66711	2026-12-01 09:00:00	\N
18	financial_posting	DOC-A	2	{"document": "DOC-A", "line": 2, "amount": "20.00"}	1	Реализация DOC-A	2026-12-05 07:40:14.66711	2026-12-01 09:00:00	\N
19	financial_posting	DOC-A	3	{"document": "DOC-A", "line": 3, "amount": "30.00"}	1	Реализация DOC-A	2026-12-05 07:40:14.66711	2026-12-01 09:00:00	\N
20	financial_posting	DOC-Q	2	{"document": "DOC-Q", "line": 2, "amount": "10.00"}	1	Реализация DOC-Q	2026-12-05 07:40:14.671004	2026-12-01 09:00:00	\N
21	financial_posting	DOC-Q	3	{"document": "DOC-Q", "line": 3, "amount": "10.00"}	1	Реализация DOC-Q	2026-12-05 07:40:14.671004	2026-12-01 09:00:00	\N
22	price	BAD-1	1	{"sku": "BAD-1", "price": "дорого"}	1	\N	2026-12-05 07:40:14.675332	2026-12-01 09:00:00	\N
23	price	BUSY-1	1	{"sku": "BUSY-1", "price": "100.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	2026-12-01 09:00:00	\N
24	price	GONE-1	1	{"sku": "GONE-1", "price": "100.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	2026-12-01 09:00:00	\N
25	price	GONE-2	1	{"sku": "GONE-2", "price": "100.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	2026-12-01 09:00:00	\N
26	price	GONE-3	1	{"sku": "GONE-3", "price": "100.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:14.678954	2026-12-01 09:00:00	\N
27	price	C-1/retail	3	{"sku":"C-1","price":"300.00","currency":"RUB","price_type":"retail"}	1	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	2026-12-01 09:00:00	Товар
28	price	C-2/retail	3	{"sku":"C-2","price":"301.00","currency":"RUB","price_type":"retail"}	1	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	2026-12-01 09:00:00	Товар
29	price	C-3/retail	3	{"sku":"C-3","price":"302.00","currency":"RUB","price_type":"retail"}	1	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	2026-12-01 09:00:00	Товар
30	price	C-4/retail	3	{"sku":"C-4","price":"303.00","currency":"RUB","price_type":"retail"}	1	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	2026-12-01 09:00:00	Товар
31	price	C-5/retail	3	{"sku":"C-5","price":"304.00","currency":"RUB","price_type":"retail"}	1	1C exchange offers_1.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.29696	2026-12-01 09:00:00	Товар
32	price	C-1/retail	4	{"sku":"C-1","price":"399.00","currency":"RUB","price_type":"retail"}	1	1C exchange offers_2.xml 2026-12-01T10:00:00	2026-12-05 07:40:15.342948	2026-12-01 09:00:00	Товар
33	price	STALE-1	2	{"sku": "STALE-1", "price": "50.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000002	2026-12-05 07:40:15.603383	2026-12-01 09:00:00	\N
34	price	STALE-1	1	{"sku": "STALE-1", "price": "40.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:16.111632	2026-12-01 09:00:00	\N
35	financial_posting	DOC-GAP	1	{"document": "DOC-GAP", "line": 1, "amount": "10.00"}	1	Реализация DOC-GAP	2026-12-05 07:40:16.858065	2026-12-01 09:11:00	\N
36	financial_posting	DOC-GAP	3	{"document": "DOC-GAP", "line": 3, "amount": "10.00"}	1	Реализация DOC-GAP	2026-12-05 07:40:16.858065	2026-12-01 09:11:00	\N
37	price	LEASE-1	1	{"sku": "LEASE-1", "price": "77.00", "currency": "RUB", "price_type": "retail"}	1	Установка цен номенклатуры 000001	2026-12-05 07:40:17.334346	2026-12-01 09:12:00	\N
\.


--
-- Data for Name: target_locks; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.target_locks (name, holder, until) FROM stdin;
\.


--
-- Data for Name: workers; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.workers (worker_id, started_at, heartbeat_at, paused_reason, breaker_state, breaker_until, pace, stopped_at, source, paused_at, unreachable_since, pause_cause) FROM stdin;
fixture-worker-1	2026-12-01 09:00:00	2026-12-01 09:11:00	\N	closed	\N	{"limit": 1, "max_limit": 1, "in_flight": 0, "paced_rate": null, "accepted_rate": 0.2, "hold_s": 0.0, "refused_last_minute": 0}	2026-12-01 09:11:00	\N	\N	\N	\N
fixture-worker-2	2026-12-01 09:12:00	2026-12-01 09:12:00	\N	closed	\N	{"limit": 1, "max_limit": 1, "in_flight": 0, "paced_rate": null, "accepted_rate": 0.0, "hold_s": 0.0, "refused_last_minute": 0}	\N	\N	\N	\N	\N
\.


--
-- Name: aggregates_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.aggregates_id_seq', 26, true);


--
-- Name: cml_catalog_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.cml_catalog_id_seq', 2, true);


--
-- Name: cml_exchanges_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.cml_exchanges_id_seq', 1, false);


--
-- Name: cml_packages_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.cml_packages_id_seq', 2, true);


--
-- Name: message_history_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.message_history_id_seq', 73, true);


--
-- Name: messages_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.messages_id_seq', 37, true);


--
-- Name: sign_in_refusals_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.sign_in_refusals_id_seq', 1, false);


--
-- Name: staging_intents_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.staging_intents_id_seq', 37, true);


--
-- Name: alembic_version alembic_version_pkc; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);


--
-- Name: aggregates pk_aggregates; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.aggregates
    ADD CONSTRAINT pk_aggregates PRIMARY KEY (id);


--
-- Name: cml_catalog pk_cml_catalog; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_catalog
    ADD CONSTRAINT pk_cml_catalog PRIMARY KEY (id);


--
-- Name: cml_exchanges pk_cml_exchanges; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_exchanges
    ADD CONSTRAINT pk_cml_exchanges PRIMARY KEY (id);


--
-- Name: cml_package_repeats pk_cml_package_repeats; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_package_repeats
    ADD CONSTRAINT pk_cml_package_repeats PRIMARY KEY (version, aggregate);


--
-- Name: cml_packages pk_cml_packages; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_packages
    ADD CONSTRAINT pk_cml_packages PRIMARY KEY (id);


--
-- Name: delivery_pause pk_delivery_pause; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.delivery_pause
    ADD CONSTRAINT pk_delivery_pause PRIMARY KEY (name);


--
-- Name: http_keys pk_http_keys; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.http_keys
    ADD CONSTRAINT pk_http_keys PRIMARY KEY (name);


--
-- Name: message_history pk_message_history; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.message_history
    ADD CONSTRAINT pk_message_history PRIMARY KEY (id);


--
-- Name: messages pk_messages; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT pk_messages PRIMARY KEY (id);


--
-- Name: notifications pk_notifications; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notifications
    ADD CONSTRAINT pk_notifications PRIMARY KEY (name);


--
-- Name: operator_sessions pk_operator_sessions; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.operator_sessions
    ADD CONSTRAINT pk_operator_sessions PRIMARY KEY (id);


--
-- Name: operators pk_operators; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.operators
    ADD CONSTRAINT pk_operators PRIMARY KEY (name);


--
-- Name: price_owners pk_price_owners; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.price_owners
    ADD CONSTRAINT pk_price_owners PRIMARY KEY (sku, price_type);


--
-- Name: shop_sku_ids pk_shop_sku_ids; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shop_sku_ids
    ADD CONSTRAINT pk_shop_sku_ids PRIMARY KEY (shop, sku);


--
-- Name: sign_in_refusals pk_sign_in_refusals; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sign_in_refusals
    ADD CONSTRAINT pk_sign_in_refusals PRIMARY KEY (id);


--
-- Name: staging_intents pk_staging_intents; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.staging_intents
    ADD CONSTRAINT pk_staging_intents PRIMARY KEY (id);


--
-- Name: target_locks pk_target_locks; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.target_locks
    ADD CONSTRAINT pk_target_locks PRIMARY KEY (name);


--
-- Name: workers pk_workers; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT pk_workers PRIMARY KEY (worker_id);


--
-- Name: aggregates uq_aggregates_kind_aggregate; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.aggregates
    ADD CONSTRAINT uq_aggregates_kind_aggregate UNIQUE (kind, aggregate);


--
-- Name: cml_catalog uq_cml_catalog_kind_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_catalog
    ADD CONSTRAINT uq_cml_catalog_kind_key UNIQUE (kind, key);


--
-- Name: cml_packages uq_cml_packages_digest; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.cml_packages
    ADD CONSTRAINT uq_cml_packages_digest UNIQUE (digest);


--
-- Name: messages uq_messages_message_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT uq_messages_message_id UNIQUE (message_id);


--
-- Name: ix_aggregates_lease_token; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_aggregates_lease_token ON public.aggregates USING btree (lease_token) WHERE (lease_token IS NOT NULL);


--
-- Name: ix_aggregates_sku_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_aggregates_sku_key ON public.aggregates USING btree (sku_key varchar_pattern_ops);


--
-- Name: ix_cml_catalog_kind_value_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_cml_catalog_kind_value_key ON public.cml_catalog USING btree (kind, value_key varchar_pattern_ops);


--
-- Name: ix_cml_exchanges_finished_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_cml_exchanges_finished_at ON public.cml_exchanges USING btree (finished_at);


--
-- Name: ix_message_history_message_pk_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_message_history_message_pk_id ON public.message_history USING btree (message_pk, id);


--
-- Name: ix_messages_aggregate_id_version; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_aggregate_id_version ON public.messages USING btree (aggregate_id, version);


--
-- Name: ix_messages_aggregate_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_aggregate_key ON public.messages USING btree (aggregate_key varchar_pattern_ops);


--
-- Name: ix_messages_claim_rank; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_claim_rank ON public.messages USING btree (claim_rank, id) WHERE ((state)::text = ANY ((ARRAY['new'::character varying, 'delayed'::character varying, 'in_progress'::character varying])::text[]));


--
-- Name: ix_messages_message_id_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_message_id_key ON public.messages USING btree (message_id_key varchar_pattern_ops);


--
-- Name: ix_messages_name_prefix; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_name_prefix ON public.messages USING btree (name varchar_pattern_ops);


--
-- Name: ix_messages_source_ref_prefix; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_source_ref_prefix ON public.messages USING btree (source_ref varchar_pattern_ops);


--
-- Name: ix_messages_state_next_try_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_state_next_try_at ON public.messages USING btree (state, next_try_at);


--
-- Name: ix_messages_state_updated_at_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_messages_state_updated_at_id ON public.messages USING btree (state, updated_at, id);


--
-- Name: ix_sign_in_refusals_last_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_sign_in_refusals_last_at ON public.sign_in_refusals USING btree (last_at);


--
-- Name: ix_staging_intents_untaken; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_staging_intents_untaken ON public.staging_intents USING btree (id) WHERE (taken_at IS NULL);


--
-- Name: staging_intents staging_intents_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER staging_intents_notify AFTER INSERT ON public.staging_intents FOR EACH STATEMENT EXECUTE FUNCTION public.exchange_staging_notify();


--
-- Name: message_history fk_message_history_message_pk_messages; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.message_history
    ADD CONSTRAINT fk_message_history_message_pk_messages FOREIGN KEY (message_pk) REFERENCES public.messages(id) ON DELETE CASCADE;


--
-- Name: messages fk_messages_aggregate_id_aggregates; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT fk_messages_aggregate_id_aggregates FOREIGN KEY (aggregate_id) REFERENCES public.aggregates(id);


--
-- PostgreSQL database dump complete
--

\unrestrict Jtnoc0xKErrGhegEETXkPUZRwR4e34aX138ra0teIXm4pcFkljgTaEEATMWKKC5

