# Independent cross-check of the accountant goldens (mpmath, 40 digits).
# Run: python3 privacy/accountant/testdata/gold.py  (needs mpmath)
from mpmath import mp, mpf, erfc, sqrt, exp, log, findroot
mp.dps = 40
Phi = lambda x: erfc(-x/sqrt(2))/2
def agdelta(eps, s, D=1): return Phi(D/(2*s)-eps*s/D) - exp(eps)*Phi(-D/(2*s)-eps*s/D)
def agsigma(eps, d):
    lo, hi = mpf('0.01'), mpf(100)
    for _ in range(200):
        m = (lo+hi)/2
        if agdelta(eps, m) <= d: hi = m
        else: lo = m
    return hi
print("analytic", agsigma(1, mpf('1e-5')), agsigma(mpf('0.5'), mpf('1e-6')))
print("classic", sqrt(2*log(mpf('1.25')/mpf('1e-5'))))
def simple(r, d): return r + 2*sqrt(r*log(1/d))
def tightdelta(r, e):
    # minimize over alpha by golden search on log
    f = lambda a: (a-1)*(a*r-e) + a*log(1-1/a) - log(a-1)
    lo, hi = mpf('1.000001'), mpf(1e6)
    # coarse scan
    best=None
    a=mpf('1.000001')
    while a<1e6:
        v=f(a)
        if best is None or v<best[0]: best=(v,a)
        a*=mpf('1.01')
    lo,hi=best[1]/mpf('1.01'),best[1]*mpf('1.01')
    for _ in range(200):
        m1=hi-(hi-lo)*mpf('0.618'); m2=lo+(hi-lo)*mpf('0.618')
        if f(m1)<f(m2): hi=m2
        else: lo=m1
    return exp(f((lo+hi)/2))
def tight(r, d):
    lo, hi = mpf(0), simple(r,d)
    for _ in range(80):
        m=(lo+hi)/2
        if tightdelta(r,m) <= d: hi=m
        else: lo=m
    return hi
for r in ['0.5','0.1']:
    print("zcdp", r, simple(mpf(r), mpf('1e-5')), tight(mpf(r), mpf('1e-5')))
# advanced composition golden: eps0=0.1, k=100, delta'=1e-6
e0=mpf('0.1'); k=100
print("adv", e0*sqrt(2*k*log(1/mpf('1e-6'))) + k*e0*(exp(e0)-1))
# rdp gaussian sigma=2 sens1 delta 1e-5
rho = mpf(1)/(2*4)
best=min((a*rho + log(1-1/a) - (log(mpf('1e-5'))+log(a))/(a-1)) for a in [1+mpf(i)/100 for i in range(1,20000)])
print("rdp", best, "tight", tight(rho, mpf('1e-5')))
