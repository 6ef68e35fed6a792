"""The compose stage: from a sweep's rows to a faster engine. Per layer the winning splices are
chosen (`select`), put in one module (rr.splice.compose), and the whole network's frame is captured
and timed with every layer's composed module in place, a composition that breaks identity or is
slower than its parts predict bisected to the phases at fault (`network`); one row per layer and
one for the network (`table`, results/composed.parquet). docs/compose.md says how."""
