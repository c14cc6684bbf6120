package config

import (
	"github.com/ladderhq/ladder"
	"github.com/ladderhq/ladder/gate"
)

// The file* types are the shape of the YAML file, field for field. They are
// kept apart from the exported types because the file spells things for
// people (durations as "72h", lanes as strings, optional fields as pointers
// so an absent key can take its default) while the exported types carry
// checked, typed values with the defaults applied.
//
// Every field has the same name in its yaml and json tags: the parser reads
// the yaml tags, the JSON Schema (ladder.schema.json) is generated from the
// json tags and jsonschema descriptions, and TestTagsAgree keeps them in step.
// A field without omitempty is required in the schema.

type fileConfig struct {
	Server     *fileServer     `yaml:"server,omitempty" json:"server,omitempty" jsonschema:"Server settings; every field has a default."`
	Identity   *fileIdentity   `yaml:"identity,omitempty" json:"identity,omitempty" jsonschema:"OAuth 2.1 and OpenID Connect: the authorization servers whose access tokens this server accepts beside ladder keys, how their claims map to a workspace and kind, and console single sign-on. See docs/identity.md."`
	Workspaces []fileWorkspace `yaml:"workspaces" json:"workspaces" jsonschema:"The tenants. Keys, queues, capabilities and gate cases belong to exactly one workspace."`
}

type fileServer struct {
	Listen           string         `yaml:"listen,omitempty" json:"listen,omitempty" jsonschema:"Address to listen on, host:port. Default 127.0.0.1:8080."`
	PublicURL        string         `yaml:"public_url,omitempty" json:"public_url,omitempty" jsonschema:"Base URL people and agents reach the server at, used in evidence links (https://ladder.example.com). Default http:// plus listen."`
	ApprovalTTL      string         `yaml:"approval_ttl,omitempty" json:"approval_ttl,omitempty" jsonschema:"How long a pending approval waits before it expires, as a Go duration (72h, 90m). Default 72h."`
	WebhookRetention string         `yaml:"webhook_retention,omitempty" json:"webhook_retention,omitempty" jsonschema:"How long delivered webhook and Slack deliveries (and events every endpoint has received) are kept, as a Go duration (168h, 24h); older ones are deleted in small batches. Dead and pending deliveries are kept. Default 168h (7 days)."`
	AuditSecretEnv   string         `yaml:"audit_secret_env,omitempty" json:"audit_secret_env,omitempty" jsonschema:"Name of the environment variable holding the secret of blind audit sampling. Default LADDER_AUDIT_SECRET. The secret itself never goes in this file."`
	CheckpointKeyEnv string         `yaml:"checkpoint_key_env,omitempty" json:"checkpoint_key_env,omitempty" jsonschema:"Name of the environment variable holding the private key that signs the audit logs' checkpoints (ladder keys checkpoint-key makes one). Default LADDER_CHECKPOINT_KEY. The key itself never goes in this file."`
	RateLimit        *fileRateLimit `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty" jsonschema:"Per-key request rate limit; over it, requests get RATE_LIMITED with Retry-After."`
	AllowedOrigins   []string       `yaml:"allowed_origins,omitempty" json:"allowed_origins,omitempty" jsonschema:"Origins (scheme://host[:port]) browsers may call /mcp from, against DNS rebinding; they also get CORS answers there (never with credentials). Requests without an Origin header are always allowed."`
	MaxShadow        *int           `yaml:"max_shadow_proposals,omitempty" json:"max_shadow_proposals,omitempty" jsonschema:"Most shadow proposals one agent key may have stored for one step while their routes are unreviewed. Over it, calls are still refused with STEP_NEEDS_PERSON but the proposal is not stored (data.proposal_recorded false) until people review older ones. Default 1000; must be at least 1."`
}

type fileRateLimit struct {
	PerSecond *float64 `yaml:"per_second,omitempty" json:"per_second,omitempty" jsonschema:"Sustained requests per second per key. Default 20; must be positive."`
	Burst     *int     `yaml:"burst,omitempty" json:"burst,omitempty" jsonschema:"Requests a key may send at once above the sustained rate. Default 40; must be at least 1."`
}

type fileWorkspace struct {
	ID           string              `yaml:"id" json:"id" jsonschema:"Workspace id, unique in the file (vantrow-bills). Letters, digits, '-', '_' and '.'."`
	Name         string              `yaml:"name,omitempty" json:"name,omitempty" jsonschema:"Plain name shown to people."`
	Scopes       map[string][]string `yaml:"scopes,omitempty" json:"scopes,omitempty" jsonschema:"Scope field (program) to the values that belong to this workspace (partner-2027). A call whose scope value is not listed is refused with WORKSPACE_REFUSED. A value may belong to one workspace only."`
	Queues       []fileQueue         `yaml:"queues,omitempty" json:"queues,omitempty" jsonschema:"Queues of work, each holding steps."`
	Capabilities []fileCapability    `yaml:"capabilities,omitempty" json:"capabilities,omitempty" jsonschema:"Actions agents of this workspace may call, one MCP tool each."`
	GateCases    []gate.Case         `yaml:"gate_cases,omitempty" json:"gate_cases,omitempty" jsonschema:"4D-CQ evidence gate cases: commits guarded by precondition functions written in CEL."`
	Slack        *fileSlack          `yaml:"slack,omitempty" json:"slack,omitempty" jsonschema:"Post this workspace's events to Slack: approval requests with Approve and Reject buttons, the rest as plain messages."`
	Webhooks     []fileWebhook       `yaml:"webhooks,omitempty" json:"webhooks,omitempty" jsonschema:"Endpoints this workspace's events (approvals, lane changes, gate holds) are POSTed to, signed as the Standard Webhooks spec says."`
}

type fileQueue struct {
	ID    string     `yaml:"id" json:"id" jsonschema:"Queue id, unique in the workspace (bills)."`
	Name  string     `yaml:"name,omitempty" json:"name,omitempty" jsonschema:"Plain name (Freight bills)."`
	Steps []fileStep `yaml:"steps,omitempty" json:"steps,omitempty" jsonschema:"The steps of this kind of work, in order."`
}

type fileStep struct {
	ID           string                     `yaml:"id" json:"id" jsonschema:"Step id, unique in the workspace (post_tms)."`
	Name         string                     `yaml:"name" json:"name" jsonschema:"Plain name people and agents ask by (Post to the TMS)."`
	Description  string                     `yaml:"description,omitempty" json:"description,omitempty" jsonschema:"What the step covers, for people reading the evidence."`
	MoneyMoving  bool                       `yaml:"money_moving,omitempty" json:"money_moving,omitempty" jsonschema:"Whether the step moves money. Money-moving steps are risk class A. Default false."`
	Class        string                     `yaml:"class,omitempty" json:"class,omitempty" jsonschema:"Risk class: A (money-moving, stricter rules) or B. Default A if money_moving, else B."`
	Lane         string                     `yaml:"lane,omitempty" json:"lane,omitempty" jsonschema:"Lane the step starts in on an empty database: human_only, shadow, propose or auto. Default shadow."`
	AuditRate    *float64                   `yaml:"audit_rate,omitempty" json:"audit_rate,omitempty" jsonschema:"Starting share of auto items sampled for audit, in (0, 1]. Default: computed from the auto threshold and weekly_volume."`
	WeeklyVolume *int                       `yaml:"weekly_volume,omitempty" json:"weekly_volume,omitempty" jsonschema:"Expected items per week, for the starting audit rate. Must be positive."`
	Rules        *ladder.ThresholdOverrides `yaml:"rules,omitempty" json:"rules,omitempty" jsonschema:"Per-step changes to the lane rules; an absent field keeps the class default."`
}

type fileCapability struct {
	ID            string         `yaml:"id" json:"id" jsonschema:"Capability id, domain:action (ticket6:readLedger); also the MCP tool name."`
	Title         string         `yaml:"title" json:"title" jsonschema:"Short human title of the tool."`
	Description   string         `yaml:"description" json:"description" jsonschema:"What the call does, what to call first and its side effects; sent to agents with every tool list."`
	PayloadSchema map[string]any `yaml:"payload_schema,omitempty" json:"payload_schema,omitempty" jsonschema:"JSON Schema of the payload: type object, and every property has a type and a description. Absent means an empty payload."`
	ScopeFields   []string       `yaml:"scope_fields,omitempty" json:"scope_fields,omitempty" jsonschema:"Scope fields every call must carry (program, relationship); each must be a key of the workspace scopes."`
	HumanGate     bool           `yaml:"human_gate,omitempty" json:"human_gate,omitempty" jsonschema:"A person approves every call: a call creates an approval request and runs nothing. Default false."`
	ReadOnly      bool           `yaml:"read_only,omitempty" json:"read_only,omitempty" jsonschema:"The upstream only reads: the MCP tool is annotated read-only and not destructive. Default false."`
	Served        *bool          `yaml:"served,omitempty" json:"served,omitempty" jsonschema:"Whether the capability is offered. A declared but unserved capability is not listed and calls get -32602. Default true."`
	Step          string         `yaml:"step,omitempty" json:"step,omitempty" jsonschema:"Step the capability is tied to, as step id or queue/step: the step's lane decides whether the agent may act alone."`
	Item          string         `yaml:"item,omitempty" json:"item,omitempty" jsonschema:"Payload field that identifies the work item of a step-tied call, as a property name (bill_id) or a JSON pointer (/bill/id); required with step. The call is routed, and sampled for audit, for that item."`
	MaxPayload    int            `yaml:"max_payload_bytes,omitempty" json:"max_payload_bytes,omitempty" jsonschema:"Largest payload a call may carry, in bytes of canonical JSON (1 to 1048576). Default 65536."`
	MaxEvidence   int            `yaml:"max_evidence_bytes,omitempty" json:"max_evidence_bytes,omitempty" jsonschema:"Largest evidence a call may carry, in bytes of canonical JSON (1 to 1048576). Default 65536."`
	Gate          *fileCapGate   `yaml:"gate,omitempty" json:"gate,omitempty" jsonschema:"Evidence gate precondition each call's evidence must PASS."`
	Executor      *fileExecutor  `yaml:"executor,omitempty" json:"executor,omitempty" jsonschema:"How a permitted call is carried out. Required unless served is false."`
}

type fileCapGate struct {
	Case           string            `yaml:"case" json:"case" jsonschema:"Id of a gate case of this workspace."`
	PreconditionFn string            `yaml:"precondition_fn" json:"precondition_fn" jsonschema:"Name of a precondition function of that case."`
	Bind           map[string]string `yaml:"bind" json:"bind" jsonschema:"How the evidence binds to the payload it authorizes: evidence field to payload field (a property name or a JSON pointer), each pair equal in every call, e.g. {bill_id: bill_id}. Required: evidence for one action never authorizes another."`
}

type fileExecutor struct {
	Kind           string            `yaml:"kind" json:"kind" jsonschema:"http (POST the payload to url), mcp (call tool on the MCP server at url) or record (record the call, run nothing)."`
	URL            string            `yaml:"url,omitempty" json:"url,omitempty" jsonschema:"Upstream URL for http and mcp: http:// or https://, or demo:NAME for the in-process upstream of 'ladder demo'."`
	Tool           string            `yaml:"tool,omitempty" json:"tool,omitempty" jsonschema:"Upstream tool name; required for mcp."`
	Timeout        string            `yaml:"timeout,omitempty" json:"timeout,omitempty" jsonschema:"Time limit of one upstream call, as a Go duration (10s, 1500ms). Default 10s."`
	Headers        map[string]string `yaml:"headers,omitempty" json:"headers,omitempty" jsonschema:"Headers sent upstream as written. Credentials belong in headers_from_env."`
	HeadersFromEnv map[string]string `yaml:"headers_from_env,omitempty" json:"headers_from_env,omitempty" jsonschema:"Header name to the environment variable holding its value, so credentials stay out of this file."`
}

type fileIdentity struct {
	Resource string       `yaml:"resource,omitempty" json:"resource,omitempty" jsonschema:"This server's resource identifier (RFC 8707, RFC 9728): the URL clients reach it at, https (http only on a loopback host). Default server.public_url. The /mcp endpoint's resource is this plus /mcp."`
	Issuers  []fileIssuer `yaml:"issuers" json:"issuers" jsonschema:"The trusted authorization servers, at least one."`
}

type fileIssuer struct {
	Name          string             `yaml:"name" json:"name" jsonschema:"Short id of the issuer, unique in the file (corp); names it in audit records and in the console's sign-in URL. Letters, digits, '-', '_' and '.'."`
	Issuer        string             `yaml:"issuer" json:"issuer" jsonschema:"Issuer identifier URL exactly as the tokens' iss claim spells it (https://login.example.com/realms/corp); its OpenID Connect discovery document is read from /.well-known/openid-configuration under it. https (http only on a loopback host)."`
	Audiences     []string           `yaml:"audiences,omitempty" json:"audiences,omitempty" jsonschema:"aud values accepted; a token must name one of them. Default the resource and the resource plus /mcp."`
	Scopes        []string           `yaml:"scopes,omitempty" json:"scopes,omitempty" jsonschema:"Scopes every token of this issuer must be granted (scope or scp claim); listed in the Protected Resource Metadata. Default none."`
	ClientIDClaim string             `yaml:"client_id_claim,omitempty" json:"client_id_claim,omitempty" jsonschema:"Claim holding the client id. Default: the first of client_id, azp, cid and appid the token has."`
	GroupsClaim   string             `yaml:"groups_claim,omitempty" json:"groups_claim,omitempty" jsonschema:"Claim holding group memberships, for group rules. Default groups."`
	Introspection *fileIntrospection `yaml:"introspection,omitempty" json:"introspection,omitempty" jsonschema:"RFC 7662 introspection endpoint for opaque (non-JWT) access tokens. Without it only JWT access tokens are accepted."`
	Console       *fileConsoleClient `yaml:"console,omitempty" json:"console,omitempty" jsonschema:"Console single sign-on through this issuer (OpenID Connect authorization code flow with PKCE). Register the redirect URL <resource>/console/oidc/<name>/callback with the issuer."`
	Rules         []fileIdentityRule `yaml:"rules" json:"rules" jsonschema:"How tokens map to a workspace and kind. A token must match rules that all give the same workspace and kind, or it is refused with TOKEN_UNMAPPED."`
}

type fileIntrospection struct {
	URL             string `yaml:"url" json:"url" jsonschema:"Introspection endpoint URL, https (http only on a loopback host)."`
	ClientID        string `yaml:"client_id,omitempty" json:"client_id,omitempty" jsonschema:"Client id ladder authenticates to the endpoint as (HTTP Basic). Default: no client authentication."`
	ClientSecretEnv string `yaml:"client_secret_env,omitempty" json:"client_secret_env,omitempty" jsonschema:"Environment variable holding that client's secret; required with client_id. The secret never goes in this file."`
}

type fileConsoleClient struct {
	ClientID        string `yaml:"client_id" json:"client_id" jsonschema:"OpenID Connect client id registered for the console."`
	ClientSecretEnv string `yaml:"client_secret_env,omitempty" json:"client_secret_env,omitempty" jsonschema:"Environment variable holding the client secret of a confidential client. Default: a public client (PKCE only)."`
	Label           string `yaml:"label,omitempty" json:"label,omitempty" jsonschema:"Text of the sign-in button. Default: Sign in with <name>."`
}

type fileIdentityRule struct {
	ClientID  string `yaml:"client_id,omitempty" json:"client_id,omitempty" jsonschema:"Match tokens of this client id."`
	Subject   string `yaml:"subject,omitempty" json:"subject,omitempty" jsonschema:"Match tokens of this subject (sub claim)."`
	Claim     string `yaml:"claim,omitempty" json:"claim,omitempty" jsonschema:"Match tokens whose claim of this name equals value, or is a list holding it."`
	Value     string `yaml:"value,omitempty" json:"value,omitempty" jsonschema:"The value claim must have; only with claim."`
	Group     string `yaml:"group,omitempty" json:"group,omitempty" jsonschema:"Match tokens whose groups claim holds this group."`
	Workspace string `yaml:"workspace" json:"workspace" jsonschema:"Workspace the matching tokens act in; * (every workspace) only for kind admin."`
	Kind      string `yaml:"kind" json:"kind" jsonschema:"agent (the MCP surface, routing, capability calls), human (approve, review, console) or admin (keys)."`
}
