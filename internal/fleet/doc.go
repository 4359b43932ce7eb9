// Package fleet holds the end-to-end test of kvwatch past one machine
// (tests only): the simulator, two sharded `kvwatch serve` pushing with
// remote write into a real victoria-metrics, vmalert evaluating the
// generated rules into the real Alertmanager, and vmagent (agent mode)
// scraping a third serve into the same store. See docs/stack.md, "Past one
// machine".
package fleet
