"""Classic (4.9 HAService / 5.x DefaultHAService) master and slave."""
