int dg_missing(void);
int ext(void) { return dg_missing(); }
