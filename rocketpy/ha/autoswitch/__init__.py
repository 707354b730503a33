"""AutoSwitch HA (controller mode): epochs, truncation, SyncStateSet (ha.md section 3)."""
