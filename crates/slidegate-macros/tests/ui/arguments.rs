use slidegate::{Limiter, MemoryStore, RateLimited, Rule, rate_limit};

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user, burst = 10)]
async fn unknown_argument(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user, key = "all")]
async fn duplicate_argument(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s")]
async fn missing_key(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limit = 5, window = "1s", key = user)]
async fn missing_limiter(user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, key = user)]
async fn missing_rule(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, rule = rule, limit = 5, window = "1s", key = user)]
async fn rule_and_limit(limiter: &Limiter<MemoryStore>, rule: &Rule, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, rule = rule, name = "login", key = user)]
async fn rule_and_name(limiter: &Limiter<MemoryStore>, rule: &Rule, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = "5", window = "1s", key = user)]
async fn limit_not_an_integer(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user, cost = 0)]
async fn zero_cost(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user, cost = 6)]
async fn cost_above_limit(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

fn main() {}
