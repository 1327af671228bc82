use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};

#[rate_limit(limiter = limiter, limit = 0, window = "1s", key = user)]
async fn zero_limit(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "10 seconds", key = user)]
async fn malformed_window(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "0ms", key = user)]
async fn zero_window(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "60", key = user)]
async fn window_without_unit(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = 60, key = user)]
async fn window_not_a_string(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", algorithm = "leaky-bucket", key = user)]
async fn unknown_algorithm(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "5ms", algorithm = "counter", key = user)]
async fn counter_window_too_short(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", name = "api::login", key = user)]
async fn bad_name(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

fn main() {}
