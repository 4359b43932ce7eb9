package signal

// Reasons of WebRequestsRefused: why serve refused a request before any
// route ran.
const (
	// RefusedHost: a Host header that is none of serve's names (DNS
	// rebinding), 403.
	RefusedHost = "host"
	// RefusedCrossOrigin: a request a web page of another origin made the
	// browser send (Sec-Fetch-Site, or Origin), 403.
	RefusedCrossOrigin = "cross_origin"
	// RefusedLoginThrottled: credentials from a source address that has
	// failed too many logins, 429 before the password is checked.
	RefusedLoginThrottled = "login_throttled"
	// RefusedBusy: a request other than the health checks on one of the
	// spare connections, 503.
	RefusedBusy = "busy"
)

// Reasons of WebConnectionsClosed.
const (
	// ClosedIdle: the connection that had been idle longest, closed to make
	// room for a new one at the cap.
	ClosedIdle = "idle"
	// ClosedOverLimit: a new connection closed at once, every other one
	// being busy with a request and the spare ones taken.
	ClosedOverLimit = "over_limit"
)

// Families about serve's HTTP listener: its connections, and the requests
// it refuses before they reach a route (docs/configuration.md, "Hostile
// clients").
var (
	WebConnections = Metric{Name: "kvwatch_web_connections", Type: Gauge, Unit: "", Self: true,
		Help: "Connections open to serve's listen addresses, the spare ones kept for the health checks included."}
	WebMaxConnections = Metric{Name: "kvwatch_web_max_connections", Type: Gauge, Unit: "", Self: true,
		Help: "Connections serve keeps open at once (--web.max-connections), besides a few spare ones that only answer the health checks."}
	WebConnectionsClosed = Metric{Name: "kvwatch_web_connections_closed_total", Type: Counter, Unit: "", Self: true,
		Help:   "Connections serve closed to stay within --web.max-connections, by reason: idle (the one idle longest, to make room for a new one) or over_limit (a new one, every other being busy).",
		Labels: []string{LabelReason}}
	WebRequestsRefused = Metric{Name: "kvwatch_web_requests_refused_total", Type: Counter, Unit: "", Self: true,
		Help:   "Requests refused before any route ran, by reason: host (403, a Host header that is none of serve's names), cross_origin (403, sent by a web page of another origin), login_throttled (429, credentials from a source with too many failed logins), busy (503, on a spare connection, which only answers the health checks).",
		Labels: []string{LabelReason}}
	WebFailedLogins = Metric{Name: "kvwatch_web_failed_logins_total", Type: Counter, Unit: "", Self: true,
		Help: "Requests whose basic auth credentials the web config refused (401); requests without credentials are not counted."}
)

// Web lists the families about serve's HTTP listener in documentation
// order.
func Web() []Metric {
	return []Metric{WebConnections, WebMaxConnections, WebConnectionsClosed, WebRequestsRefused, WebFailedLogins}
}
