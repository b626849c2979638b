// Filled in with the metrics component.
