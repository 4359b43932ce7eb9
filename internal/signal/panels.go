package signal

// EmptyWhen starts the line of a dashboard panel's (or template
// variable's) description that declares it empty by design, and says when:
// "Empty when: no selected server has a cache tier". The generated
// dashboards write it (package stack) and `kvwatch check queries` reads it
// (package querycheck): a selector of such a panel that matches nothing is
// reported as info naming the condition, not as an error. Any dashboard may
// use it (docs/check-queries.md).
const EmptyWhen = "Empty when: "
