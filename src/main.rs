fn main() {
    println!("qwen35: CLI being written");
}
