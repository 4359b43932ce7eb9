package signal

// LabelRemote names the remote write (its name, by default the URL's host
// and path) on the remote-write families.
const LabelRemote = "remote"

// Families about serve's remote writes (present with --remote-write.url or
// a remote_write: section). Each carries LabelRemote. Prometheus' own
// prometheus_remote_storage_* families are the model.
var (
	RemoteWriteSamplesSent = Metric{Name: "kvwatch_remote_write_samples_sent_total", Type: Counter, Unit: "", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Samples the store accepted (2xx)."}
	RemoteWriteSamplesFailed = Metric{Name: "kvwatch_remote_write_samples_failed_total", Type: Counter, Unit: "", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Samples the store rejected for good (4xx other than 429, or 429 with retry_on_http_429: false); they are not sent again."}
	RemoteWriteSamplesRetried = Metric{Name: "kvwatch_remote_write_samples_retried_total", Type: Counter, Unit: "", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Samples sent again after a failure that may pass on retry (connection error, timeout, 5xx, 429); one sample counts once per retry."}
	RemoteWriteSamplesDropped = Metric{Name: "kvwatch_remote_write_samples_dropped_total", Type: Counter, Unit: "", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Samples dropped unsent: the oldest ones when the queue was full, and what was left when serve stopped past flush_deadline."}
	RemoteWriteQueueSamples = Metric{Name: "kvwatch_remote_write_queue_samples", Type: Gauge, Unit: "", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Samples waiting to be sent, the request in flight included."}
	RemoteWriteQueueCapacity = Metric{Name: "kvwatch_remote_write_queue_capacity_samples", Type: Gauge, Unit: "", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Samples the queue holds before it drops the oldest (queue_config.capacity)."}
	RemoteWriteQueueBytes = Metric{Name: "kvwatch_remote_write_queue_bytes", Type: Gauge, Unit: "bytes", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Memory held by the queued requests (protobuf, snappy-compressed)."}
	RemoteWriteSentBytes = Metric{Name: "kvwatch_remote_write_sent_bytes_total", Type: Counter, Unit: "bytes", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Compressed request bytes the store accepted."}
	RemoteWriteHighestSent = Metric{Name: "kvwatch_remote_write_highest_sent_timestamp_seconds", Type: Gauge, Unit: "seconds", Self: true,
		Labels: []string{LabelRemote},
		Help:   "Unix time of the newest sample the store accepted: time() minus it is how far the store lags behind."}
)

// RemoteWrite lists the remote-write families in documentation order.
func RemoteWrite() []Metric {
	return []Metric{RemoteWriteSamplesSent, RemoteWriteSamplesFailed, RemoteWriteSamplesRetried,
		RemoteWriteSamplesDropped, RemoteWriteQueueSamples, RemoteWriteQueueCapacity,
		RemoteWriteQueueBytes, RemoteWriteSentBytes, RemoteWriteHighestSent}
}
